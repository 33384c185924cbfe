"""One ``Session`` used by two threads, each running an agentic function that calls the
model and a tool several times: each function sees only its own conversation, and the
session is one well-formed graph that reopens as it is."""

from __future__ import annotations

import contextvars
import threading
from pathlib import Path
from typing import Any

import pytest

import openprogram
from context import tool_pair_problems
from graph import ConversationGraph
from openprogram import Session
from openprogram.testing import FunctionModel, ModelRequest, tool_call

ROUNDS = 8


pytestmark = pytest.mark.usefixtures("switch_often")


def _reply(request: ModelRequest) -> Any:
    """A tool call for a new question; once the result is in, an answer quoting it."""
    last = request.last
    if last["role"] == "user":
        return {"tool_calls": [tool_call("measure", {"text": last["content"]})]}
    return f"answer: {last['content']}"


def measure(text: str) -> str:
    """Measure a text."""
    return f"{len(text)} characters in {text!r}"


def test_two_threads_run_functions_in_one_session(tmp_path: Path) -> None:
    model = FunctionModel(_reply)
    db = tmp_path / "op.db"
    session = Session(db, "s", model=model, state_dir=tmp_path / "state", system="Be brief.")

    @openprogram.function
    def investigate(name: str) -> list[str]:
        return [session.llm(f"{name} question {i}", tools=[measure]) for i in range(ROUNDS)]

    results: dict[str, Any] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(2, timeout=60)

    def run(name: str, how: Any) -> None:
        try:
            start.wait()
            results[name] = how(investigate, name)
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    with session:  # the copied context carries the session into its thread
        copied = contextvars.copy_context()
    threads = [
        threading.Thread(target=run, args=("alpha", session.run)),
        threading.Thread(target=copied.run, args=(run, "beta", lambda fn, *a: fn(*a))),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    for name in ("alpha", "beta"):
        asked = [f"{name} question {i}" for i in range(ROUNDS)]
        assert results[name] == [f"answer: {len(q)} characters in {q!r}" for q in asked]
    # each function's prompts held its own questions only
    for request in model.requests:
        users = {m["content"].split()[0] for m in request.messages if m["role"] == "user"}
        assert len(users) == 1, users
        assert tool_pair_problems(request.messages) == []
    graph = session.graph
    functions = [n for n in graph.nodes() if n.kind == "function"]
    assert sorted(f.payload.input["name"] for f in functions) == ["alpha", "beta"]  # type: ignore[union-attr]
    for function in functions:
        assert function.status == "completed"
        own = [n for n in graph.children(function.id) if n.kind == "dialogue"]
        name = function.payload.input["name"]  # type: ignore[union-attr]
        assert [n.payload.content for n in own if n.payload.role == "user"] == [  # type: ignore[union-attr]
            f"{name} question {i}" for i in range(ROUNDS)
        ]
        rendered = session.engine.render(frame=function.id)
        assert tool_pair_problems(rendered.messages) == []
    assert tool_pair_problems(graph.to_openai()) == []
    assert session.store.leases("s") == {}
    reopened = ConversationGraph.open(db, session="s")
    assert reopened.nodes() == graph.nodes() and reopened.events() == graph.events()
    assert reopened.repairs == []
