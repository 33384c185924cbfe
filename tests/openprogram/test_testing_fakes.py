"""``openprogram.testing``: the fake models, ``tool_call`` and ``override``."""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
from pathlib import Path
from typing import Any

import pytest

import openprogram
from openprogram import Model, ModelResponse, Session, Usage

# internal: override() must reset the current-model context variable
from openprogram.testing import FunctionModel, ModelRequest, TestModel, override, tool_call

HI = [{"role": "user", "content": "hi"}]


def test_tool_call() -> None:
    first, second = tool_call("a"), tool_call("b", {"x": [1, 2]})
    assert first["id"] != second["id"] and first["id"].startswith("call_")
    assert first == {
        "id": first["id"],
        "type": "function",
        "function": {"name": "a", "arguments": "{}"},
    }
    assert json.loads(second["function"]["arguments"]) == {"x": [1, 2]}
    assert tool_call("c", '{"raw": true}', id="mine") == {
        "id": "mine",
        "type": "function",
        "function": {"name": "c", "arguments": '{"raw": true}'},
    }


def test_test_model_script_entries() -> None:
    given = ModelResponse({"role": "assistant", "content": "as is"}, Usage(5, 6), model="m")
    failure = ConnectionError("down")
    model = TestModel(
        [
            "text",
            {"tool_calls": [tool_call("search", {"q": "x"}, id="c1")]},
            {"content": "with thinking", "thinking": "hmm"},
            given,
            failure,
        ],
        name="scripted",
    )
    assert isinstance(model, Model)
    text = model.complete(HI)
    assert text.message == {"role": "assistant", "content": "text"}
    assert text.model == "scripted"
    assert text.usage.input_tokens == len(json.dumps(HI[0])) // 4 > 0
    assert text.usage.output_tokens > 0
    calls = model.complete(HI)
    assert calls.message == {
        "role": "assistant",
        "content": None,
        "tool_calls": [tool_call("search", {"q": "x"}, id="c1")],
    }
    assert model.complete(HI).message["thinking"] == "hmm"
    assert model.complete(HI) is given
    with pytest.raises(ConnectionError) as raised:
        model.complete(HI)
    assert raised.value is failure
    with pytest.raises(AssertionError, match="TestModel ran out of replies after 5"):
        model.complete(HI)
    assert len(model.requests) == 6


def test_test_model_default_and_bad_replies() -> None:
    model = TestModel(["first"], default="again")
    assert [model.complete(HI).message["content"] for _ in range(3)] == ["first", "again", "again"]
    with pytest.raises(TypeError, match="must be str, dict or ModelResponse"):
        TestModel([42]).complete(HI)


def test_requests_are_recorded_as_sent() -> None:
    model = TestModel(["a", "b"])
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    tools = [tool_call("ignored")]  # any list of dicts is recorded as given
    model.complete(messages, tools, temperature=0)
    messages.append({"role": "user", "content": "later"})  # the record is a copy
    asyncio.run(model.acomplete(messages))
    first, second = model.requests
    assert first == ModelRequest(HI, tools, {"temperature": 0})
    assert first.last == {"role": "user", "content": "hi"}
    assert second.messages[-1]["content"] == "later" and second.tools == []
    assert ModelRequest([], []).last == {}


def test_function_model_sees_messages_and_tools() -> None:
    seen: list[ModelRequest] = []

    def reply(request: ModelRequest) -> Any:
        seen.append(request)
        if request.tool_names:
            return {"tool_calls": [tool_call(request.tool_names[0], {})]}
        return ModelResponse({"role": "assistant", "content": "plain"}, Usage(1, 2), model="f")

    model = FunctionModel(reply, name="fn")
    schema = {"type": "function", "function": {"name": "lookup", "parameters": {}}}
    called = model.complete(HI, [schema])
    assert called.message["tool_calls"][0]["function"]["name"] == "lookup"
    assert called.model == "fn"
    plain = asyncio.run(model.acomplete(HI))
    assert (plain.message["content"], plain.usage, plain.model) == ("plain", Usage(1, 2), "f")
    assert [r.tool_names for r in seen] == [["lookup"], []]
    assert seen == model.requests


def test_function_model_in_a_session_sees_the_prompt(tmp_path: Path) -> None:
    def lookup(key: str) -> str:
        """Look something up."""
        return key.upper()

    def reply(request: ModelRequest) -> Any:
        if request.last["role"] == "user":
            return {"tool_calls": [tool_call("lookup", {"key": request.last["content"]})]}
        return f"found {request.last['content']}"

    model = FunctionModel(reply)
    session = Session(":memory:", model=model, system="sys", state_dir=tmp_path)
    assert session.llm("abc", tools=[lookup]) == "found ABC"
    first, second = model.requests
    assert first.messages == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "abc"},
    ]
    assert first.tool_names[0] == "lookup"
    assert first.tools[0]["function"]["parameters"]["required"] == ["key"]
    assert second.last == {
        "role": "tool",
        "tool_call_id": second.messages[2]["tool_calls"][0]["id"],
        "content": "ABC",
    }


def test_override_nests_and_follows_tasks_and_threads(tmp_path: Path) -> None:
    outer, inner = TestModel(default="outer"), TestModel(default="inner")
    session = Session(":memory:", model=TestModel(default="own"), state_dir=tmp_path)
    answers: list[str] = []

    def in_thread() -> None:
        answers.append(str(openprogram.llm("from a thread")))

    async def in_task() -> str:
        return str(await openprogram.allm("from a task"))

    with session:
        with override(model=outer):
            assert openprogram.llm("a") == "outer"
            with override(model=inner) as active:
                assert active is inner
                assert openprogram.llm("b") == "inner"
                thread = threading.Thread(target=contextvars.copy_context().run, args=(in_thread,))
                thread.start()
                thread.join()
                assert asyncio.run(in_task()) == "inner"
            assert openprogram.llm("c") == "outer"
        assert openprogram.llm("d") == "own"
    assert answers == ["inner"]
    with Session(":memory:", model=TestModel(default="later"), state_dir=tmp_path / "later"):
        assert openprogram.llm("e") == "later"  # no override outlives its block
    assert len(outer.requests) == 2 and len(inner.requests) == 3
