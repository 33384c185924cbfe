"""A framework message edited after it was stored, through each framework's own run: the
adapters convert a message once and keep it by identity (issue 35, item 4), so an edit in
place (``message.content = …``, a call's arguments changed) must still reach the graph, as
a new branch from where the history changed, with nothing stored lost."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _overhead import collect_leftovers

from openprogram import Session


@pytest.fixture(autouse=True)
def _collected() -> Iterator[None]:
    """Each test's leftovers (Pydantic AI's run iterators, on the loop its ``run_sync``
    keeps) collected here, before the Agents SDK's ``run_sync`` of a later test shuts that
    loop's generators down under them."""
    yield
    collect_leftovers()


def _user_texts(session: Session) -> list[str]:
    """The user messages of the session's current branch, as its next render shows them."""
    return [str(m["content"]) for m in session.engine.preview().messages if m["role"] == "user"]


def test_pydantic_ai_a_message_edited_in_place_is_stored_again(tmp_path: Path) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from openprogram.integrations.pydantic_ai import OpenProgramCapability

    def echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(f"answer {len(messages)}")])

    session = Session(tmp_path / "op.db", budget=50_000)
    agent = Agent(FunctionModel(echo), capabilities=[OpenProgramCapability(session)])
    history = agent.run_sync("first").all_messages()
    history = agent.run_sync("second", message_history=history).all_messages()
    stored = len(session.graph)

    part = history[0].parts[0]
    assert isinstance(part, UserPromptPart)
    part.content = "first, edited"  # the very object the adapter converted before
    history = agent.run_sync("third", message_history=history).all_messages()
    assert _user_texts(session) == ["first, edited", "second", "third"]
    assert len(session.graph) > stored + 2  # a new branch: the old one is still stored

    history[1].parts = [TextPart("an answer rewritten")]  # the parts replaced, same message
    agent.run_sync("fourth", message_history=history)
    answers = [m["content"] for m in session.engine.preview().messages if m["role"] == "assistant"]
    assert answers[0] == "an answer rewritten"
    assert _user_texts(session) == ["first, edited", "second", "third", "fourth"]


def test_langchain_a_message_edited_in_place_is_stored_again(tmp_path: Path) -> None:
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage

    from openprogram.integrations.langchain import OpenProgramMiddleware

    call = {"name": "lookup", "args": {"key": "k_1"}, "id": "c1"}
    replies = iter([AIMessage(content=f"answer {i}") for i in range(4)])
    session = Session(tmp_path / "op.db", budget=50_000)
    agent = create_agent(
        GenericFakeChatModel(messages=replies), middleware=[OpenProgramMiddleware(session)]
    )
    asked = AIMessage(content="", tool_calls=[call], id="a0")
    history: list[Any] = [
        HumanMessage("first", id="h0"),
        asked,
        {"role": "tool", "content": "v_1", "tool_call_id": "c1"},
    ]
    history = agent.invoke({"messages": [*history, HumanMessage("second", id="h1")]})["messages"]
    stored = len(session.graph)

    history[0].content = "first, edited"  # the very object the adapter converted before
    history = agent.invoke({"messages": [*history, HumanMessage("third", id="h2")]})["messages"]
    assert _user_texts(session) == ["first, edited", "second", "third"]
    assert len(session.graph) > stored + 2  # a new branch: the old one is still stored

    history[1].tool_calls[0]["args"]["key"] = "k_2"  # a nested value changed in place
    agent.invoke({"messages": [*history, HumanMessage("fourth", id="h3")]})
    calls = [m for m in session.engine.preview().messages if m.get("tool_calls")]
    assert '"k_2"' in calls[0]["tool_calls"][0]["function"]["arguments"]
    assert _user_texts(session) == ["first, edited", "second", "third", "fourth"]


def test_openai_agents_an_item_edited_in_place_is_sent_and_stored(tmp_path: Path) -> None:
    """The session hands each call the entries it keeps for its stored list (issue 35, item
    4): an item a filter of the user's edits in the call's input before the session's is
    rendered, sent and stored as edited, on a new branch (the session's list, what the SDK
    wrote, stays as it was); the next call, unedited, goes out with the SDK's own items."""
    pytest.importorskip("agents")
    from _agents_fakes import Answering
    from agents import Agent, RunConfig, Runner, set_tracing_disabled
    from agents.run_config import CallModelData, ModelInputData

    from openprogram.integrations.openai_agents import OpenProgramSession

    set_tracing_disabled(True)
    model = Answering()
    received = model.received
    session = Session(tmp_path / "op.db", budget=50_000)
    memory = OpenProgramSession(session)
    edit = False
    given: list[list[Any]] = []

    async def editing(data: CallModelData[Any]) -> ModelInputData:
        if edit:
            data.model_data.input[0]["content"] = "first, edited"  # the call's own item
        given.append(list(data.model_data.input))
        return await memory.input_filter(data)

    agent = Agent("a", model=model)
    config = RunConfig(call_model_input_filter=editing)
    for question in ("first", "second"):
        Runner.run_sync(agent, question, session=memory, run_config=config)
    stored = len(session.graph)
    edit = True
    Runner.run_sync(agent, "third", session=memory, run_config=config)
    assert received[-1][0]["content"] == "first, edited"
    last = memory.mirror.last  # the call's render: the edited item, stored on a new branch
    assert last is not None
    assert [m["content"] for m in last.messages if m["role"] == "user"] == [
        "first, edited",
        "second",
        "third",
    ]
    assert len(session.graph) > stored + 2  # the old branch is still stored

    edit = False
    Runner.run_sync(agent, "fourth", session=memory, run_config=config)
    assert _user_texts(session) == ["first", "second", "third", "fourth"]
    assert all(a is b for a, b in zip(received[-1], given[-1], strict=True))
