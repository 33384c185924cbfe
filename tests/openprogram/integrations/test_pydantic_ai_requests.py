"""The Pydantic AI capability through ``Agent`` runs on ``FunctionModel``: the agent's
``instructions`` inside the budget, and one session per conversation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _adapter_helpers import lookup

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from openprogram import Session
from openprogram.integrations.pydantic_ai import OpenProgramCapability, to_entries

LONG = "Follow the house rules. " + " ".join(
    f"Rule {i}: keep key k_{i} in mind." for i in range(300)
)


def _tokens(session: Session, messages: list[ModelMessage], info: AgentInfo) -> int:
    """Tokens of what the model received: instructions, messages and tool schemas."""
    chat = [entry.message for entry in to_entries(messages)]
    if info.instructions:
        chat.insert(0, {"role": "system", "content": info.instructions})
    tools = [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters_json_schema,
            },
        }
        for t in info.function_tools
    ]
    counter = session.engine.counter
    return int(counter.count_messages(chat) + counter.count_tools(tools))


def test_instructions_are_stored_and_counted_in_the_budget(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=6_000, state_dir=tmp_path / "state")
    sizes: list[int] = []
    seen: list[str | None] = []

    def researcher(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sizes.append(_tokens(session, messages, info))
        seen.append(info.instructions)
        turn = len(sizes)
        if turn <= 20:
            call = ToolCallPart("lookup", {"key": f"k_{turn}"}, tool_call_id=f"c{turn}")
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart("done")])

    capability = OpenProgramCapability(session)
    agent = Agent(
        FunctionModel(researcher), instructions=LONG, capabilities=[capability], tools=[lookup]
    )
    agent.run_sync("Look up k_1 to k_20.")
    assert max(sizes) <= 6_000
    assert seen == [LONG] * len(seen)  # sent whole, as the agent gave them
    systems = [n for n in session.graph.nodes() if n.role == "system"]
    assert len(systems) == 1 and systems[0].payload.content == LONG  # type: ignore[union-attr]


def test_each_conversation_is_a_session_of_its_own(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=50_000)

    def echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(f"answer {len(messages)}")])

    capability = OpenProgramCapability(session)
    agent = Agent(FunctionModel(echo), capabilities=[capability])
    histories: dict[str, list[Any]] = {"a": [], "b": []}
    for turn in range(6):
        for name in ("a", "b"):
            result = agent.run_sync(f"{name} question {turn}", message_history=histories[name])
            histories[name] = result.all_messages()
    sessions = capability.sessions
    assert len(sessions) == 2
    first = histories["a"][0].conversation_id
    assert sessions[first] is session
    for name, history in histories.items():
        held = sessions[history[0].conversation_id]
        texts = [str(n.payload.content) for n in held.graph.nodes()]  # type: ignore[union-attr]
        assert len(texts) == 12 and all(t.startswith(("answer", name)) for t in texts)
        assert len(held.graph.branches()) == 1


def test_a_history_without_conversation_ids_stays_in_one_session(tmp_path: Path) -> None:
    """A history built by hand names no conversation: Pydantic AI makes up a new id for
    each run, and each run used to open a session of its own and store the history again."""
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    session = Session(tmp_path / "op.db", budget=50_000)
    history: list[ModelMessage] = []
    for n in range(20):
        history += [
            ModelRequest(parts=[UserPromptPart(f"question {n}")]),
            ModelResponse(parts=[TextPart(f"answer {n}")]),
        ]

    def echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("noted")])

    capability = OpenProgramCapability(session)
    agent = Agent(FunctionModel(echo), capabilities=[capability])
    runs = [agent.run_sync("And now?", message_history=history) for _ in range(3)]
    assert len({run.all_messages()[-1].conversation_id for run in runs}) == 3  # made up anew
    assert [s.id for s in capability.sessions.values()] == [session.id]
    assert len(session.graph) == 42  # the history once, then one question and its answer
    continued = agent.run_sync("Go on.", message_history=runs[-1].all_messages())
    assert continued.output == "noted"
    assert [s.id for s in capability.sessions.values()] == [session.id]
    assert len(session.graph) == 44

    again = OpenProgramCapability(Session(tmp_path / "op.db", session.id, budget=50_000))
    Agent(FunctionModel(echo), capabilities=[again]).run_sync("And now?", message_history=history)
    assert [s.id for s in again.sessions.values()] == [session.id]  # another process alike
