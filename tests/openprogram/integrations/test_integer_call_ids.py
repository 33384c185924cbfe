"""An integer tool call id (issue 31, item 9): a provider that sends ``id=0`` or
``tool_call_id=7`` means it as an id, so every adapter stores it as its text, for the call
and its result alike, and the pair holds (it used to be "tool call 0 has no id")."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from _adapter_helpers import lookup

from graph import ConversationGraph, MemoryStore, Node, Tool, tool_result_message
from openprogram import Session
from openprogram.cli import main


def paired(session: Session) -> list[tuple[str, Any]]:
    """Each stored tool call's id and its result's text."""
    out = []
    for node in session.graph.nodes():
        if node.kind == "tool":
            assert isinstance(node.payload, Tool)
            out.append((node.payload.call_id, tool_result_message(node)["content"]))
    return out


def test_pydantic_ai(tmp_path: Path) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from openprogram.integrations.pydantic_ai import OpenProgramCapability

    seen: list[list[ModelMessage]] = []

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        if len(seen) == 1:
            return ModelResponse(parts=[ToolCallPart("lookup", {"key": "k_1"}, tool_call_id=0)])
        return ModelResponse(parts=[TextPart("done")])

    session = Session(tmp_path / "op.db")
    agent = Agent(
        FunctionModel(reply), tools=[lookup], capabilities=[OpenProgramCapability(session)]
    )
    assert agent.run_sync("Look up k_1.").output == "done"
    assert paired(session) == [("0", lookup("k_1"))]


def test_langchain(tmp_path: Path) -> None:
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from openprogram.integrations.langchain import OpenProgramMiddleware

    class Fake(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Fake:  # type: ignore[override]
            return self

    call = {"name": "lookup", "args": {"key": "k_1"}, "id": 7, "type": "tool_call"}
    # a provider integration's message, built as its client built it (an int id
    # unchecked); LangChain's ToolNode answers it with ToolMessage(tool_call_id="7")
    asked = AIMessage.model_construct(
        content="",
        tool_calls=[call],
        invalid_tool_calls=[],
        additional_kwargs={},
        response_metadata={},
        type="ai",
        id=None,
        name=None,
        usage_metadata=None,
    )
    session = Session(tmp_path / "op.db")
    model = Fake(messages=iter([asked, AIMessage(content="done")]))
    agent = create_agent(model, tools=[lookup], middleware=[OpenProgramMiddleware(session)])
    state = agent.invoke({"messages": [{"role": "user", "content": "Look up k_1."}]})
    assert state["messages"][-1].content == "done"
    assert paired(session) == [("7", lookup("k_1"))]


def test_openai_agents(tmp_path: Path) -> None:
    pytest.importorskip("agents")
    from agents import Agent, function_tool, set_tracing_disabled
    from test_openai_agents_requests import Scripted, say

    from openprogram.integrations.openai_agents import OpenProgramSession

    set_tracing_disabled(True)
    session = Session(tmp_path / "op.db", budget=50_000)
    memory = OpenProgramSession(session)
    model = Scripted(lambda turn, items: [say("done")])
    agent = Agent("a", model=model, tools=[function_tool(lookup)])
    items: list[Any] = [
        {"role": "user", "content": "Look up k_1."},
        {"type": "function_call", "call_id": 7, "name": "lookup", "arguments": '{"key": "k_1"}'},
        {"type": "function_call_output", "call_id": 7, "output": lookup("k_1")},
    ]
    assert asyncio.run(memory.run(agent, items)).final_output == "done"
    assert paired(session) == [("7", lookup("k_1"))]


def test_the_graph_and_an_imported_trace(tmp_path: Path) -> None:
    graph = ConversationGraph(MemoryStore(), "s")
    graph.append({"role": "user", "content": "go"})
    call = {"id": 0, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    graph.append({"role": "assistant", "content": None, "tool_calls": [call]})
    graph.append({"role": "tool", "tool_call_id": 0, "content": "found"})
    tool: Node = next(n for n in graph.nodes() if n.kind == "tool")
    assert tool_result_message(tool) == {"role": "tool", "tool_call_id": "0", "content": "found"}

    trace = tmp_path / "trace.json"
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": 0, "content": "found"},
        {"role": "assistant", "content": "done"},
    ]
    trace.write_text(json.dumps(messages))
    db = str(tmp_path / "op.db")
    assert main(["--db", db, "import", str(trace), "--session", "t", "--format", "openai"]) == 0
    assert paired(Session(db, "t")) == [("0", "found")]
