"""`openprogram export` then `openprogram import` carries what the adapters keep beside
the records (issue 35, item 1): each framework's run continued on the imported database
sends exactly the request it sends on the original, and stores as many nodes.

Each test runs the framework's own agent under a small budget (so layers exist), copies
the database through the CLI, then continues the same conversation once on each copy and
compares what the model received. Layer ids a continuation makes are new on each copy, so
ids are compared by their order of first appearance."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _adapter_helpers import ROUNDS, lookup, small_session

from openprogram import Session
from openprogram.cli import main

ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")


def _same_ids(value: Any) -> str:
    """``value`` as JSON, each id replaced by its order of first appearance."""
    seen: dict[str, str] = {}
    text = json.dumps(value, sort_keys=True, default=str)
    return ULID.sub(lambda m: seen.setdefault(m.group(0), f"#{len(seen)}"), text)


def _copy(tmp_path: Path, session: Session) -> tuple[Path, Path]:
    """The session's database and an empty one it was exported to and imported into."""
    original, copy = tmp_path / "op.db", tmp_path / "copy.db"
    out = tmp_path / "session.json"
    session.close()
    assert main(["--db", str(original), "export", session.id, str(out)]) == 0
    assert main(["--db", str(copy), "import", str(out)]) == 0
    return original, copy


def _continued(
    tmp_path: Path, session_id: str, run: Callable[[Session], list[Any]]
) -> list[tuple[str, int]]:
    """The next run on the original and on the imported copy: what the model received
    (ids by order) and how many nodes the run stored, for each."""
    original, copy = tmp_path / "op.db", tmp_path / "copy.db"
    found = []
    for db, folder in ((original, tmp_path / "state"), (copy, tmp_path / "copy-state")):
        session = Session(db, session_id, state_dir=folder)
        before = len(session.graph)
        sent = run(session)
        found.append((_same_ids(sent), len(session.graph) - before))
        session.close()
    return found


def test_a_pydantic_ai_run_continues_alike_on_an_imported_database(tmp_path: Path) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from openprogram.integrations.pydantic_ai import OpenProgramCapability, to_entries

    turns = iter(range(1, ROUNDS + 2))

    def lookups(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = next(turns)
        if turn <= ROUNDS:
            return ModelResponse(parts=[ToolCallPart("lookup", {"key": f"k_{turn}"}, f"c{turn}")])
        return ModelResponse(parts=[TextPart("done")])

    session = small_session(tmp_path)
    agent = Agent(FunctionModel(lookups), tools=[lookup], instructions="You look things up.")
    first = agent.run_sync("Look up k_1 to k_10.", capabilities=[OpenProgramCapability(session)])
    assert session.graph.layers(active=True)  # compaction acted: the copy must show it too
    history = first.all_messages()
    _copy(tmp_path, session)

    def run(opened: Session) -> list[Any]:
        received: list[Any] = []

        def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            received.append([entry.message for entry in to_entries(messages)])
            return ModelResponse(parts=[TextPart("k_1 is w0")])

        again = Agent(FunctionModel(answer), tools=[lookup], instructions="You look things up.")
        again.run_sync(
            "What was k_1?", message_history=history, capabilities=[OpenProgramCapability(opened)]
        )
        return received

    on_original, on_copy = _continued(tmp_path, session.id, run)
    assert on_copy == on_original
    assert on_original[1] == 2  # the prompt and the answer only


class _Chat:
    """LangChain's fake chat model answering from a script, recording what it received."""

    @staticmethod
    def make(script: Iterator[Any], received: list[Any]) -> Any:
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import convert_to_openai_messages

        class Recording(GenericFakeChatModel):
            def bind_tools(self, tools: Any, **kwargs: Any) -> Recording:  # type: ignore[override]
                return self

            def _generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
                received.append(convert_to_openai_messages(messages))
                return super()._generate(messages, *args, **kwargs)

        return Recording(messages=script)


def test_a_langchain_thread_continues_alike_on_an_imported_database(tmp_path: Path) -> None:
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage

    from openprogram.integrations.langchain import OpenProgramMiddleware

    def lookups() -> Iterator[AIMessage]:
        for turn in range(1, ROUNDS + 1):
            call = {"name": "lookup", "args": {"key": f"k_{turn}"}, "id": f"c{turn}"}
            yield AIMessage(content="", tool_calls=[call], id=f"a{turn}")
        yield AIMessage(content="done", id="a-last")

    config = {"configurable": {"thread_id": "thread-1"}}
    session = small_session(tmp_path)
    agent = create_agent(
        _Chat.make(lookups(), []),
        tools=[lookup],
        system_prompt="You look things up.",
        middleware=[OpenProgramMiddleware(session)],
    )
    task = {"messages": [{"role": "user", "content": "Look up k_1 to k_10."}]}
    state = agent.invoke(task, config)  # type: ignore[arg-type]
    assert session.graph.layers(active=True)
    _copy(tmp_path, session)

    def run(opened: Session) -> list[Any]:
        received: list[Any] = []
        model = _Chat.make(iter([AIMessage(content="k_1 is w0", id="a-next")]), received)
        again = create_agent(
            model,
            tools=[lookup],
            system_prompt="You look things up.",
            middleware=[OpenProgramMiddleware(opened)],
        )
        follow = {"messages": [*state["messages"], {"role": "user", "content": "What was k_1?"}]}
        again.invoke(follow, config)  # type: ignore[arg-type]
        return received

    on_original, on_copy = _continued(tmp_path, session.id, run)
    assert on_copy == on_original
    assert on_original[1] == 2  # the prompt and the answer only


def test_an_agents_sdk_session_continues_alike_on_an_imported_database(tmp_path: Path) -> None:
    pytest.importorskip("agents")
    from _agents_fakes import say
    from agents import Agent, Model, ModelResponse, function_tool, set_tracing_disabled
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
    )

    from openprogram.integrations.openai_agents import OpenProgramSession

    set_tracing_disabled(True)

    class Scripted(Model):
        def __init__(self, lookups: int) -> None:
            self.lookups = lookups
            self.requests: list[Any] = []

        async def get_response(
            self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
        ) -> ModelResponse:
            items = [{"role": "user", "content": input}] if isinstance(input, str) else input
            self.requests.append([system_instructions, list(items)])
            turn = len(self.requests)
            if turn <= self.lookups:
                arguments = json.dumps({"key": f"k_{turn}"})
                call = ResponseFunctionToolCall(
                    type="function_call", call_id=f"c{turn}", name="lookup", arguments=arguments
                )
                return ModelResponse(output=[call], usage=Usage(), response_id=None)
            return ModelResponse(output=[say("done")], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    session = small_session(tmp_path)
    memory = OpenProgramSession(session)
    old = Agent(
        "helper", instructions="Old rules.", tools=[function_tool(lookup)], model=Scripted(ROUNDS)
    )
    asyncio.run(memory.run(old, "Look up k_1 to k_10.", max_turns=20))
    new = Agent(
        "helper", instructions="New rules.", tools=[function_tool(lookup)], model=Scripted(0)
    )
    asyncio.run(memory.run(new, "Thanks."))
    assert session.graph.layers(active=True)
    items = asyncio.run(memory.get_items())
    _copy(tmp_path, session)

    def run(opened: Session) -> list[Any]:
        copy = OpenProgramSession(Session(opened.store, opened.id))
        assert asyncio.run(copy.get_items()) == items  # every item the SDK wrote
        model = Scripted(0)
        agent = Agent(
            "helper", instructions="New rules.", tools=[function_tool(lookup)], model=model
        )
        asyncio.run(copy.run(agent, "?"))
        assert model.requests[0][0] == "New rules."
        return model.requests

    on_original, on_copy = _continued(tmp_path, session.id, run)
    assert on_copy == on_original
