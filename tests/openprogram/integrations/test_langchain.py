"""The LangChain v1 middleware with LangChain's own fake chat model: a ten-round
``create_agent`` agent under a small budget, what its model received, a history tool
reading back a collapse, a rollback — and the agent state's messages left whole."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _adapter_helpers import (
    EXPAND,
    ROUNDS,
    SYSTEM,
    TASK,
    lookup,
    newest_layer,
    restored_texts,
    small_session,
)

pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from pydantic import Field

from graph import Tool, layer_handle, text_of
from openprogram import HISTORY_TOOLS, Session
from openprogram.integrations.langchain import OpenProgramMiddleware


class Recording(GenericFakeChatModel):
    """The fake chat model, recording what each call received (tools bound as is)."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Recording:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def _text(messages: list[BaseMessage]) -> str:
    pieces = []
    for message in messages:
        pieces.append(
            text_of(message.content) if not isinstance(message.content, str) else message.content
        )  # type: ignore[arg-type]
        if isinstance(message, AIMessage):
            pieces.extend(str(call["args"]) for call in message.tool_calls)
    return "\n".join(pieces)


def _script(received: list[list[BaseMessage]]) -> Iterator[AIMessage]:
    for turn in range(1, ROUNDS + 1):
        call = {"name": "lookup", "args": {"key": f"k_{turn}"}, "id": f"c{turn}"}
        yield AIMessage(content=f"step {turn}", tool_calls=[call])
    found = EXPAND.search(_text(received[-1]))
    assert found, "no collapse was shown to the model"
    call = {"name": "expand_layer", "args": {"id": found.group(1)}, "id": "x1"}
    yield AIMessage(content="", tool_calls=[call])
    yield AIMessage(content="done")
    yield AIMessage(content="done again")


def test_compaction_read_back_and_rollback(tmp_path: Path) -> None:
    session = small_session(tmp_path)
    received: list[list[BaseMessage]] = []
    model = Recording(messages=_script(received))
    model.received = received
    middleware = OpenProgramMiddleware(session)
    agent = create_agent(model, tools=[lookup], middleware=[middleware], system_prompt=SYSTEM)
    state = agent.invoke({"messages": [{"role": "user", "content": TASK}]})
    history: list[BaseMessage] = state["messages"]

    # What the model received: the state's own messages while nothing is compacted (the
    # system message in front, as create_agent sends it), a collapse later.
    assert received[1][1:] == history[:3] and received[1][1] is history[0]
    assert received[1][0].content == SYSTEM
    assert "collapse" in {r.tier for r in session.engine.records()}
    late = _text(received[ROUNDS - 1])
    assert "[Collapsed:" in late and lookup("k_1") not in late
    assert late.startswith(SYSTEM) and TASK in late

    # The agent state keeps every message whole.
    outputs = [m.content for m in history if isinstance(m, ToolMessage)]
    assert outputs[:ROUNDS] == [lookup(f"k_{i}") for i in range(1, 11)]

    # The model read a collapsed output back through a history tool.
    answer = received[-1][-1]
    assert isinstance(answer, ToolMessage) and answer.name == "expand_layer"
    assert lookup("k_1") in str(answer.content)
    assert {t.name for t in middleware.tools} == set(HISTORY_TOOLS)

    # Every message is in the graph; calls and results are tool nodes; ids in meta.
    tools = {n.payload.call_id: n for n in session.graph.nodes() if isinstance(n.payload, Tool)}
    assert {f"c{i}" for i in range(1, 11)} | {"x1"} <= set(tools)
    assert text_of(tools["c1"].result.content) == lookup("k_1")  # type: ignore[union-attr]
    first = next(n for n in session.graph.nodes() if n.role == "user")
    assert first.meta["langchain"]["id"] == history[0].id

    # Roll back the newest layer from our side: the next call shows what it replaced.
    layer = newest_layer(session)
    originals = restored_texts(session, layer)
    session.engine.rollback(layer.id)
    agent.invoke({"messages": [*history, {"role": "user", "content": "Anything else?"}]})
    sent = _text(received[-1])
    assert all(text in sent for text in originals)
    assert f'expand_layer("{layer_handle(layer)}")' not in sent and "Anything else?" in sent


def test_the_async_path_stores_and_renders_alike(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=50_000)
    received: list[list[BaseMessage]] = []

    def script() -> Iterator[AIMessage]:
        yield AIMessage(
            content="", tool_calls=[{"name": "lookup", "args": {"key": "k_1"}, "id": "a1"}]
        )
        yield AIMessage(content="found it")

    model = Recording(messages=script())
    model.received = received
    agent = create_agent(model, tools=[lookup], middleware=[OpenProgramMiddleware(session)])
    state = asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "find k_1"}]}))
    assert received[-1] == state["messages"][:3]
    roles = [n.role or n.kind for n in session.graph.nodes()]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_history_tools_can_be_left_out(tmp_path: Path) -> None:
    assert OpenProgramMiddleware(Session(tmp_path / "op.db"), history_tools=False).tools == []


def test_reported_input_tokens_anchor_the_estimates(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db")
    usage = {"input_tokens": 5_000, "output_tokens": 1, "total_tokens": 5_001}
    model = Recording(messages=iter([AIMessage(content="ok", usage_metadata=usage)]))
    agent = create_agent(model, tools=[], middleware=[OpenProgramMiddleware(session)])
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    assert session.engine.anchor.ratio > 1.0
    answer = session.graph.nodes()[-1]
    assert answer.meta["usage"]["input"] == 5_000 and session.usage()["total"]["calls"] == 1
