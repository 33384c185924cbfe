"""The runtime over real HTTP: litellm talks to the scripted provider on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _fake_provider import FakeProvider
from _runtime_helpers import as_sent, texts

import openprogram
from context import ContextOverflowError
from openprogram import HISTORY_TOOLS, LiteLLMModel, ModelError, Session


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _model(fake: FakeProvider) -> LiteLLMModel:
    # no retries: each retry of a 5xx would consume a scripted reply
    return LiteLLMModel(
        "openai/fake-model", api_base=fake.base_url, api_key="sk-test", num_retries=0, max_retries=0
    )


def _session(fake: FakeProvider, tmp_path: Path, **kwargs: Any) -> Session:
    return Session(":memory:", model=_model(fake), state_dir=tmp_path / "state", **kwargs)


def _wire(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as litellm puts them on the wire (it leaves out a ``None`` content)."""
    return [{k: v for k, v in m.items() if v is not None} for m in as_sent(messages)]


def _bodies(fake: FakeProvider) -> list[dict[str, Any]]:
    assert all(r.path == "/v1/chat/completions" for r in fake.requests)
    return [r.body for r in fake.requests]


def test_agent_run_with_parallel_tool_calls(fake_provider: FakeProvider, tmp_path: Path) -> None:
    fake = fake_provider
    fake.reply_tool_calls(
        [("add", '{"a": 1, "b": 2}'), ("add", '{"a": 30, "b": 12}')],
        prompt_tokens=120,
        completion_tokens=9,
    )
    fake.reply("3 and 42", prompt_tokens=200, completion_tokens=4)
    session = _session(fake, tmp_path, system="Use the tools.")
    renders = []
    real_render = session.engine.render

    def render(*args: Any, **kwargs: Any) -> Any:
        renders.append(real_render(*args, **kwargs))
        return renders[-1]

    session.engine.render = render  # type: ignore[method-assign]
    assert session.llm("Add 1+2 and 30+12.", tools=[add]) == "3 and 42"

    first, second = _bodies(fake)
    assert first["model"] == "fake-model"
    assert [t["function"]["name"] for t in first["tools"]] == ["add", *HISTORY_TOOLS]
    assert first["messages"] == _wire(renders[0].messages)
    assert second["messages"] == _wire(renders[1].messages)
    calls = second["messages"][2]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ['{"a": 1, "b": 2}', '{"a": 30, "b": 12}']
    assert second["messages"][3:] == [
        {"role": "tool", "tool_call_id": calls[0]["id"], "content": "3"},
        {"role": "tool", "tool_call_id": calls[1]["id"], "content": "42"},
    ]
    # recorded: the tool nodes in call order with their results, usage from the wire
    tools = [n for n in session.graph.nodes() if n.kind == "tool"]
    assert [(t.payload.call_id, t.result.content) for t in tools] == [  # type: ignore[union-attr]
        (calls[0]["id"], "3"),
        (calls[1]["id"], "42"),
    ]
    answers = [n for n in session.graph.nodes() if n.role == "assistant"]
    assert [n.meta["usage"] for n in answers] == [
        {"input": 120, "cache_read": 0, "cache_creation": 0, "output": 9, "cost": None},
        {"input": 200, "cache_read": 0, "cache_creation": 0, "output": 4, "cost": None},
    ]
    assert {n.meta["model"] for n in answers} == {"fake-model"}
    total = session.usage()["total"]
    assert (total["calls"], total["input_tokens"], total["output_tokens"]) == (2, 320, 13)
    assert session.engine.anchor.reports == 2


def test_async_agent_over_http(fake_provider: FakeProvider, tmp_path: Path) -> None:
    fake_provider.reply_tool_call("add", '{"a": 2, "b": 2}', prompt_tokens=50)
    fake_provider.reply("four", prompt_tokens=60)
    session = _session(fake_provider, tmp_path)

    @openprogram.function
    async def agent(question: str) -> Any:
        return await openprogram.allm(question, tools=[add])

    assert session.run(agent, "2+2?") == "four"
    node = next(n for n in session.graph.nodes() if n.kind == "function")
    assert (node.status, node.output) == ("completed", "four")
    assert len(fake_provider.requests) == 2
    assert _bodies(fake_provider)[1]["messages"][-1]["content"] == "4"
    assert session.usage()["functions"]["agent"]["input_tokens"] == 110


def _history(session: Session, rounds: int) -> None:
    for n in range(rounds):
        session.graph.append({"role": "user", "content": f"question {n}: " + "word " * 120})
        session.graph.append({"role": "assistant", "content": f"answer {n}: " + "word " * 120})


def test_one_overflow_renders_harder_and_retries(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    fake_provider.overflow()
    fake_provider.reply("it fits now", prompt_tokens=900)
    session = _session(fake_provider, tmp_path, system="sys", budget=3_000)
    _history(session, 8)
    assert session.llm("the last question") == "it fits now"

    first, second = _bodies(fake_provider)
    assert len(second["messages"]) < len(first["messages"])
    assert second["messages"][-1] == {"role": "user", "content": "the last question"}
    (record,) = [r for r in session.engine.records() if r.tier == "reactive"]
    assert record.tokens_after < record.tokens_before
    assert record.details["reported"] == [131_072, 128_000]
    assert "context_length_exceeded" in str(record.error) or "maximum context" in str(record.error)
    assert session.engine.failures == 0 and session.engine.squeeze == 1.0
    assert texts(session.graph.to_openai())[-1] == "it fits now"


def test_three_overflows_give_up(fake_provider: FakeProvider, tmp_path: Path) -> None:
    for _ in range(3):
        fake_provider.overflow()
    fake_provider.reply("never sent")
    session = _session(fake_provider, tmp_path)
    with pytest.raises(ContextOverflowError, match="too long 3 times in a row"):
        session.llm("hello")
    assert len(fake_provider.requests) == 3
    assert [r.details["attempt"] for r in session.engine.records()] == [1, 2]
    assert [n.role for n in session.graph.nodes()] == ["user"]


def test_a_server_error_is_a_model_error(fake_provider: FakeProvider, tmp_path: Path) -> None:
    fake_provider.status(500)
    fake_provider.reply("not reached")
    session = _session(fake_provider, tmp_path)
    with pytest.raises(ModelError, match=r"model openai/fake-model failed: .*status 500"):
        session.llm("hello")
    assert len(fake_provider.requests) == 1  # no retry consumed the next reply
    assert session.engine.records() == []
    assert session.llm("again") == "not reached"
