"""The LangChain middleware through ``create_agent`` runs: the system prompt inside the
budget, one session per thread, interleaved runs stored once, call ids a provider accepts,
and a model that cannot bind tools."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _adapter_helpers import SYSTEM, TASK, lookup, small_session

pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from context import tool_pair_problems
from graph import Tool
from openprogram import Session
from openprogram.cli import main as cli
from openprogram.integrations import MalformedMessage
from openprogram.integrations._langchain_messages import Outgoing  # internal: see below
from openprogram.integrations.langchain import OpenProgramMiddleware

THREAD: Any = {"configurable": {"thread_id": "t"}}
LONG = "Follow the house rules. " + " ".join(
    f"Rule {i}: keep key k_{i} in mind." for i in range(300)
)


class Recording(GenericFakeChatModel):
    """The fake chat model, recording each call's messages and tools (tools bound as is)."""

    received: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[list[Any]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Recording:  # type: ignore[override]
        self.bound.append(list(tools))
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def _calls(n: int, prefix: str = "c") -> Iterator[AIMessage]:
    for turn in range(1, n + 1):
        call = {"name": "lookup", "args": {"key": f"k_{turn}"}, "id": f"{prefix}{turn}"}
        yield AIMessage(content=f"step {turn}", tool_calls=[call])
    yield AIMessage(content="done")


def _sent_tokens(session: Session, model: Recording, index: int) -> int:
    """Tokens of what the model received: every message (the system one too) and the tool
    schemas it was bound with, counted as the engine counts."""
    counter = session.engine.counter
    messages = convert_to_openai_messages(model.received[index])
    tools = [convert_to_openai_tool(t) for t in model.bound[index]]
    return int(counter.count_messages(messages) + counter.count_tools(tools))


def test_the_system_prompt_is_stored_and_counted_in_the_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = Session(tmp_path / "op.db", budget=6_000, state_dir=tmp_path / "state")
    model = Recording(messages=_calls(20))
    middleware = OpenProgramMiddleware(session)
    agent = create_agent(model, tools=[lookup], middleware=[middleware], system_prompt=LONG)
    agent.invoke({"messages": [{"role": "user", "content": "Look up k_1 to k_20."}]})
    largest = max(_sent_tokens(session, model, i) for i in range(len(model.received)))
    assert largest <= 6_000
    assert all(str(r[0].content) == LONG for r in model.received)  # sent whole, as given
    systems = [n for n in session.graph.nodes() if n.role == "system"]
    assert len(systems) == 1 and systems[0].payload.content == LONG  # type: ignore[union-attr]
    capsys.readouterr()
    assert cli(["--db", str(tmp_path / "op.db"), "context", session.id]) == 0
    shown = capsys.readouterr().out  # the prompt sent last, its system prompt counted
    assert re.search(r"system messages\s*│\s*3,\d{3}", shown)


def test_a_changed_system_prompt_is_stored_where_it_changed(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=50_000)
    model = Recording(messages=iter([AIMessage(content="one"), AIMessage(content="two")]))
    first = create_agent(model, middleware=[OpenProgramMiddleware(session)], system_prompt="A")
    state = first.invoke({"messages": [{"role": "user", "content": "q1"}]})
    second = create_agent(model, middleware=[OpenProgramMiddleware(session)], system_prompt="B")
    second.invoke({"messages": [*state["messages"], {"role": "user", "content": "q2"}]})
    assert [str(m.content) for m in model.received[-1]] == ["B", "q1", "one", "q2"]
    texts = [str(n.payload.content) for n in session.graph.nodes()]  # type: ignore[union-attr]
    assert texts == ["A", "q1", "one", "B", "q2", "two"]


def _run_threads(session: Session, config: bool) -> OpenProgramMiddleware:
    """Two conversations of six turns each, their calls alternating through one agent."""
    replies = iter([AIMessage(content=f"answer {i}") for i in range(12)])
    model = Recording(messages=replies)
    middleware = OpenProgramMiddleware(session)
    agent = create_agent(model, middleware=[middleware])
    states: dict[str, list[Any]] = {"a": [], "b": []}
    for turn in range(6):
        for thread in ("a", "b"):
            asked = {"role": "user", "content": f"{thread} question {turn}"}
            options: dict[str, Any] = {}
            if config:
                options["config"] = {"configurable": {"thread_id": thread}}
            state = agent.invoke({"messages": [*states[thread], asked]}, **options)
            states[thread] = state["messages"]
    return middleware


def test_each_thread_is_a_session_of_its_own(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=50_000)
    middleware = _run_threads(session, config=True)
    sessions = middleware.sessions
    assert sorted(sessions) == ["a", "b"] and sessions["a"] is session
    for thread, held in sessions.items():
        texts = [str(n.payload.content) for n in held.graph.nodes()]  # type: ignore[union-attr]
        assert len(texts) == 12 and all(t.startswith(("answer", thread)) for t in texts)
    assert sessions["b"].id == f"{session.id}.b"
    reopened = Session(tmp_path / "op.db", f"{session.id}.b")
    assert reopened.config.budget == 50_000 and len(reopened.graph) == 12


def test_interleaved_runs_store_each_message_once(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=50_000)
    _run_threads(session, config=False)  # no thread ids: one session, two branches
    assert len(session.graph) == 24


def test_two_calls_with_one_id_go_out_with_valid_pairs(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=50_000)
    calls = [{"name": "lookup", "args": {"key": f"k_{i}"}, "id": "c1"} for i in (1, 2)]
    model = Recording(messages=iter([AIMessage(content="", tool_calls=calls), AIMessage("ok")]))
    agent = create_agent(model, tools=[lookup], middleware=[OpenProgramMiddleware(session)])
    agent.invoke({"messages": [{"role": "user", "content": "look up k_1 and k_2"}]})
    sent = convert_to_openai_messages(model.received[-1])
    assert tool_pair_problems(sent) == []
    assert [m["content"] for m in sent if m["role"] == "tool"] == [lookup("k_1"), lookup("k_2")]
    tools = [n for n in session.graph.nodes() if isinstance(n.payload, Tool)]
    assert [t.payload.call_id for t in tools] == ["c1", "c1~2"]  # type: ignore[union-attr]
    assistant = next(n for n in session.graph.nodes() if n.role == "assistant")
    assert assistant.meta["call_ids"] == {"c1~2": "c1"}  # the framework's own id, kept


def test_a_tool_call_without_an_id_is_a_clear_error(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=50_000)
    call = {"name": "lookup", "args": {"key": "k_1"}, "id": None}
    answer = AIMessage(content="", tool_calls=[call], id="run-7")
    model = Recording(messages=iter([answer]))
    agent = create_agent(model, tools=[lookup], middleware=[OpenProgramMiddleware(session)])
    with pytest.raises(MalformedMessage, match=r"langchain message 1 \(AIMessage id=run-7\)"):
        agent.invoke({"messages": [{"role": "user", "content": "look up k_1"}]})
    assert [n.role for n in session.graph.nodes()] == ["user"]  # the bad answer is not stored


def test_a_model_that_cannot_bind_tools_gets_none(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=50_000)
    model = GenericFakeChatModel(messages=iter([AIMessage(content="hello")]))
    agent = create_agent(model, middleware=[OpenProgramMiddleware(session)])
    state = agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    assert state["messages"][-1].content == "hello"
    assert [n.role for n in session.graph.nodes()] == ["user", "assistant"]


def _compacted_runs(tmp_path: Path) -> tuple[Recording, OpenProgramMiddleware]:
    """Three runs of ten lookups each on one thread, under a budget that collapses rounds and
    clears results (so calls go out with new messages among the state's own)."""
    session = small_session(tmp_path)
    model = Recording(messages=itertools.chain(_calls(10, "a"), _calls(10, "b"), _calls(10, "c")))
    middleware = OpenProgramMiddleware(session)
    agent = create_agent(model, tools=[lookup], middleware=[middleware], system_prompt=SYSTEM)
    messages: list[Any] = []
    for run in range(3):
        asked = {"role": "user", "content": f"{TASK} (run {run})"}
        messages = agent.invoke({"messages": [*messages, asked]}, THREAD)["messages"]
    return model, middleware


def test_each_call_sends_what_converting_its_whole_render_sends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, middleware = _compacted_runs(tmp_path / "reused")
    assert middleware.session.graph.layers(active=True)  # compaction changed what is sent

    whole = Outgoing.messages

    def afresh(outgoing: Outgoing, paired: Any) -> tuple[str, list[Any]]:
        outgoing.__init__()  # nothing of the last call reused
        return whole(outgoing, paired)

    monkeypatch.setattr(Outgoing, "messages", afresh)  # internal: the full conversion
    expected, _ = _compacted_runs(tmp_path / "afresh")
    assert len(model.received) == len(expected.received) == 33
    for got, want in zip(model.received, expected.received, strict=True):
        assert convert_to_openai_messages(got) == convert_to_openai_messages(want)


def test_a_tool_changed_between_calls_is_counted_as_it_is_sent(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=50_000)
    model = Recording(messages=iter([AIMessage(content=f"answer {n}") for n in range(3)]))
    described = StructuredTool.from_function(lookup)
    shaped = StructuredTool(
        name="shaped",
        description="Takes a shape.",
        args_schema={"type": "object", "properties": {"a": {"type": "string"}}},
        func=lambda **kwargs: "ok",
    )
    middleware = OpenProgramMiddleware(session, history_tools=False)
    agent = create_agent(model, tools=[described, shaped], middleware=[middleware])
    messages: list[Any] = []
    for question in ("q1", "q2", "q3"):
        asked = {"role": "user", "content": question}
        messages = agent.invoke({"messages": [*messages, asked]})["messages"]
        assert session.engine.tools == [convert_to_openai_tool(t) for t in model.bound[-1]]
        described.description = f"Look up a key (asked {question})."  # reassigned
        shaped.args_schema["properties"][question] = {"type": "integer"}  # type: ignore[index]
    assert "asked q2" in session.engine.tools[0]["function"]["description"]
    assert "q2" in session.engine.tools[1]["function"]["parameters"]["properties"]
