"""The user's latest request stays in every prompt, after every note and summary, however
long the work on it runs under a small budget (issue 22, item 1)."""

from __future__ import annotations

from typing import Any

from graph import text_of
from openprogram import Session
from openprogram.testing import FunctionModel, ModelRequest, tool_call

FIX = "Now write the fix for src/export.py."


def grep(pattern: str) -> str:
    """Search the repository.

    Args:
        pattern: what to look for
    """
    return f"match for {pattern}: " + " ".join(f"src/mod_{i}.py:{i}" for i in range(150))


def _session(budget: int) -> tuple[Session, list[ModelRequest]]:
    seen: list[ModelRequest] = []

    def reply(request: ModelRequest) -> Any:
        seen.append(request)
        step = len(seen)
        if step in (12, 30):
            return "done"
        call = tool_call("grep", {"pattern": f"p{step}"}, id=f"c{step}")
        return {"content": f"step {step}", "tool_calls": [call]}

    session = Session(":memory:", model=FunctionModel(reply), budget=budget)
    assert session.llm("Find the bug.", tools=[grep]) == "done"
    assert session.llm(FIX, tools=[grep]) == "done"
    return session, seen


def _removed(text: str) -> bool:
    return "earlier round(s)" in text or text.startswith("[Context Compaction]")


def test_the_latest_request_is_in_every_prompt_after_every_note() -> None:
    _, seen = _session(6_000)
    turn_two = seen[12:]
    assert any(_removed(text_of(m.get("content"))) for m in turn_two[-1].messages)
    for request in turn_two:
        texts = [text_of(m.get("content")) for m in request.messages]
        asked = [
            i for i, t in enumerate(texts) if t == FIX and request.messages[i]["role"] == "user"
        ]
        assert asked, "the request is not in the prompt"
        notes = [i for i, t in enumerate(texts) if _removed(t)]
        assert not notes or asked[-1] > max(notes), "a note comes after the request"
        assert texts[0] == "Find the bug."  # the task stays first


def test_earlier_requests_survive_in_the_compaction() -> None:
    session, _ = _session(6_000)
    compactions = [i for i in session.engine.layers() if i.layer.kind == "compact"]
    assert compactions
    shown = [text_of(m.get("content")) for m in compactions[-1].layer.replacement or []]
    assert any(t.startswith("[Context Compaction]") and "Find the bug." in t for t in shown)
    # The compaction that covered the request's round keeps it verbatim with its summary
    # (a later one that merges it summarizes it; the prompt shows the request itself).
    kept = [
        [text_of(m.get("content")) for m in info.layer.replacement or []] for info in compactions
    ]
    assert any(FIX in texts for texts in kept)
