"""``Session`` holds its binding and its receipts as objects instead of mixing them in:
its class hierarchy is itself alone, and its public surface is what it was with the
mixins (captured before they became objects)."""

from __future__ import annotations

from openprogram import Session, current_session
from openprogram.testing import TestModel

SESSION_SURFACE = [
    "allm",
    "bound",
    "close",
    "configure",
    "copy",
    "delete",
    "fork",
    "history_tools",
    "id",
    "last_prompt",
    "list",
    "llm",
    "max_steps",
    "policy",
    "receipt",
    "run",
    "scrub",
    "store",
    "usage",
]
SESSION_ATTRIBUTES = [
    "config",
    "engine",
    "folder",
    "graph",
    "history",
    "interrupted",
    "leases",
    "model",
    "summarizer",
]


def _public(value: object) -> list[str]:
    return sorted(name for name in dir(value) if not name.startswith("_"))


def test_a_session_has_no_mixin() -> None:
    assert Session.__mro__ == (Session, object)


def test_a_sessions_public_surface_is_unchanged() -> None:
    assert _public(Session) == SESSION_SURFACE
    with Session(":memory:", model=TestModel(["Paris."])) as session:
        assert _public(session) == sorted([*SESSION_SURFACE, *SESSION_ATTRIBUTES])
        assert current_session() is session
        assert session.receipt() is None and session.last_prompt() is None
        assert session.llm("Capital of France?") == "Paris."
        receipt = session.receipt()
        assert receipt is not None and receipt.seq == session.graph.last_seq - 1
        prompt = session.last_prompt()
        assert prompt is not None and prompt.messages[-1]["content"] == "Capital of France?"
        assert session.run(current_session) is session
    session.close()
