"""The Pydantic AI capability with Pydantic AI's own test models: a ten-round agent under a
small budget, what its model received, a history tool reading back a collapse, a rollback."""

from __future__ import annotations

import asyncio
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

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage

from context import Policy
from graph import Tool, layer_handle, text_of
from openprogram import HISTORY_TOOLS, Session
from openprogram.cli import main as cli
from openprogram.integrations.pydantic_ai import OpenProgramCapability


def _text(messages: list[ModelMessage]) -> str:
    pieces = []
    for message in messages:
        for part in message.parts:
            content = getattr(part, "content", None)
            if isinstance(content, str):
                pieces.append(content)
            if isinstance(part, ToolCallPart):
                pieces.append(part.args_as_json_str())
    return "\n".join(pieces)


class Researcher:
    """A FunctionModel script: ten lookups, then it reads back the first collapse it was
    shown through ``expand_layer``, then it answers."""

    def __init__(self) -> None:
        self.requests: list[list[ModelMessage]] = []
        self.expanded: str | None = None

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        turn = len(self.requests)
        if turn <= ROUNDS:
            call = ToolCallPart("lookup", {"key": f"k_{turn}"}, tool_call_id=f"c{turn}")
            return ModelResponse(parts=[TextPart(f"step {turn}"), call])
        if self.expanded is None:
            found = EXPAND.search(_text(messages))
            assert found, "no collapse was shown to the model"
            self.expanded = found.group(1)
            call = ToolCallPart("expand_layer", {"id": self.expanded}, tool_call_id="x1")
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart(f"done after {turn} requests")])


def test_compaction_read_back_and_rollback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = small_session(tmp_path)
    script = Researcher()
    capability = OpenProgramCapability(session)
    agent = Agent(
        FunctionModel(script), capabilities=[capability], system_prompt=SYSTEM, tools=[lookup]
    )
    result = agent.run_sync(TASK)
    history = result.all_messages()

    # What the model received: before any compaction, the framework's own messages as they
    # are (round-trip exact); later, a collapse in place of the first rounds.
    assert script.requests[0] == history[:1]
    assert script.requests[1] == history[:3]
    assert script.requests[1][0] is history[0]
    assert "collapse" in {r.tier for r in session.engine.records()}
    late = _text(script.requests[ROUNDS - 1])
    assert "[Collapsed:" in late and lookup("k_1") not in late
    assert late.startswith(SYSTEM) and TASK in late

    # The framework's own history stays whole: every lookup output, uncut.
    returns = [p for m in history for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [p.content for p in returns[:ROUNDS]] == [lookup(f"k_{i}") for i in range(1, 11)]

    # The model read a collapsed output back through a history tool.
    answer = [p for p in script.requests[-1][-1].parts if isinstance(p, ToolReturnPart)]
    assert answer and answer[0].tool_name == "expand_layer"
    assert lookup("k_1") in str(answer[0].content)
    assert "expand_layer" in {t.name for t in capability.get_toolset().tools.values()}  # type: ignore[union-attr]

    # Every message is in the graph; tool calls and results are tool nodes.
    tools = {n.payload.call_id: n for n in session.graph.nodes() if isinstance(n.payload, Tool)}
    assert {f"c{i}" for i in range(1, 11)} | {"x1"} <= set(tools)
    assert text_of(tools["c1"].result.content) == lookup("k_1")  # type: ignore[union-attr]
    assert tools["c1"].payload.name == "lookup"  # type: ignore[union-attr]
    first = next(n for n in session.graph.nodes() if n.role == "user")
    assert first.meta["pydantic_ai"]["run_id"] == history[0].run_id

    # Roll back the newest layer from our side: the next request shows what it replaced.
    layer = newest_layer(session)
    originals = restored_texts(session, layer)
    session.engine.rollback(layer.id)
    again = agent.run_sync("Anything else?", message_history=history)
    sent = _text(script.requests[-1])
    assert again.output.startswith("done")
    assert all(text in sent for text in originals)
    assert f'expand_layer("{layer_handle(layer)}")' not in sent
    assert "Anything else?" in sent

    # The CLI reads the adapter's session like any other.
    capsys.readouterr()
    assert cli(["--db", str(tmp_path / "op.db"), "records", session.id]) == 0
    records = capsys.readouterr().out
    assert "collapse" in records and "rollback" in records
    assert cli(["--db", str(tmp_path / "op.db"), "show", session.id]) == 0
    assert "lookup" in capsys.readouterr().out


def test_test_model_calls_every_history_tool(tmp_path: Path) -> None:
    """TestModel calls every tool it is given: the history tools answer as tools, and a bad
    id comes back as an error the model reads, not an exception."""
    session = Session(tmp_path / "op.db", budget=50_000)
    agent = Agent(TestModel(), capabilities=[OpenProgramCapability(session)])
    result = agent.run_sync("Hello")
    called = {
        p.tool_name: str(p.content)
        for m in result.all_messages()
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }
    assert set(called) == set(HISTORY_TOOLS)
    assert called["read_output"].startswith("Error: no node")
    stored = [n.payload.name for n in session.graph.nodes() if isinstance(n.payload, Tool)]
    assert sorted(stored) == sorted(HISTORY_TOOLS)


def test_history_tools_can_be_left_out(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db")
    capability = OpenProgramCapability(session, history_tools=False)
    assert capability.get_toolset() is None


def test_a_different_history_forks_and_keeps_the_old_branch(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=50_000)
    seen: list[list[ModelMessage]] = []

    def echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(parts=[TextPart(f"answer {len(seen)}")])

    agent = Agent(FunctionModel(echo), capabilities=[OpenProgramCapability(session)])
    first = agent.run_sync("first question").all_messages()
    agent.run_sync("second question", message_history=first)
    agent.run_sync("other question", message_history=first)  # a retry from the first answer
    assert _text(seen[-1]) == "first question\nanswer 1\nother question"
    texts = [text_of(n.payload.content) for n in session.graph.nodes()]  # type: ignore[union-attr]
    assert texts == [
        "first question",
        "answer 1",
        "second question",
        "answer 2",
        "other question",
        "answer 3",
    ]
    assert len(session.graph.branches()) == 2


def test_a_new_process_resumes_the_mirror(tmp_path: Path) -> None:
    """The mirror's branch is stored: a capability on a reopened session appends only what
    is new."""
    seen: list[Any] = []

    def echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(parts=[TextPart("ok")])

    first = Agent(
        FunctionModel(echo), capabilities=[OpenProgramCapability(Session(tmp_path / "op.db", "s1"))]
    )
    history = first.run_sync("one").all_messages()
    reopened = Session(tmp_path / "op.db", "s1")
    second = Agent(FunctionModel(echo), capabilities=[OpenProgramCapability(reopened)])
    second.run_sync("two", message_history=history)
    roles = [n.role for n in reopened.graph.nodes()]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert seen[-1][0] is history[0] and seen[-1][:2] == history[:2]


def _bash_history(calls: int) -> list[ModelMessage]:
    history: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart(SYSTEM), UserPromptPart("Run the checks.")])
    ]
    for i in range(calls):
        call_id = f"toolu_{i:03d}"
        history.append(ModelResponse(parts=[ToolCallPart("Bash", {"cmd": f"check {i}"}, call_id)]))
        output = f"output {i}" + " ok" * 150
        history.append(ModelRequest(parts=[ToolReturnPart("Bash", output, call_id)]))
    return history


def test_anthropic_cache_edits_pass_through_with_the_messages_unchanged(tmp_path: Path) -> None:
    """On a Claude policy, microcompact asks the provider to clear old outputs (a cache
    edit) instead of changing the messages: the edit goes out in the request's settings."""
    history = _bash_history(55)
    seen: list[tuple[list[ModelMessage], Any]] = []

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append((messages, info.model_settings))
        return ModelResponse(parts=[TextPart("all checks ran")])

    def run(budget: int) -> OpenProgramCapability:
        policy = Policy(model="claude-sonnet-4-5")
        session = Session(
            tmp_path / f"{budget}.db",
            budget=budget,
            policy=policy,
            state_dir=tmp_path / f"s{budget}",
        )
        capability = OpenProgramCapability(session, history_tools=False)
        Agent(FunctionModel(reply), capabilities=[capability]).run_sync(
            "Go on.", message_history=history
        )
        return capability

    plain = run(1_000_000).mirror.last
    assert plain is not None and plain.context_management is None
    squeezed = run(plain.tokens - 1_000).mirror.last
    assert squeezed is not None and squeezed.context_management
    messages, settings = seen[-1]
    # every message as it was (the provider clears, not us); the run's new prompt aside
    assert messages[:-1] == history[:-1] and _text(messages) == _text(seen[0][0])
    assert settings["extra_body"]["context_management"] == squeezed.context_management
    assert settings["extra_headers"]["anthropic-beta"].startswith("context-management")


def test_reported_input_tokens_anchor_the_estimates_of_real_models_only(tmp_path: Path) -> None:
    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(
            parts=[TextPart("ok")], usage=RequestUsage(input_tokens=5_000, output_tokens=1)
        )

    guessed = Session(tmp_path / "a.db")
    Agent(FunctionModel(reply), capabilities=[OpenProgramCapability(guessed)]).run_sync("hi")
    assert guessed.engine.anchor.ratio == 1.0  # a test model's usage is a guess: ignored
    reported = Session(tmp_path / "b.db")
    capability = OpenProgramCapability(reported, anchor_usage=True)
    Agent(FunctionModel(reply), capabilities=[capability]).run_sync("hi")
    assert reported.engine.anchor.ratio > 1.0


def test_streamed_runs_and_tool_retries_are_stored(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=50_000)
    tries: list[str] = []

    def flaky(key: str) -> str:
        """Look up a key, failing the first time.

        Args:
            key: what to look up
        """
        tries.append(key)
        if len(tries) == 1:
            raise ModelRetry("the index is warming up; try again")
        return f"value of {key}"

    agent = Agent(
        TestModel(call_tools=["flaky"]),
        capabilities=[OpenProgramCapability(session, history_tools=False)],
        tools=[flaky],
    )

    async def stream() -> str:
        async with agent.run_stream("Look it up.") as result:
            return str(await result.get_output())

    assert "value of" in asyncio.run(stream())
    results = [n.result for n in session.graph.nodes() if isinstance(n.payload, Tool)]
    assert [r.is_error for r in results if r is not None] == [True, False]
    assert "warming up" in text_of(results[0].content)  # type: ignore[union-attr]
    assert [n.role for n in session.graph.nodes() if n.kind == "dialogue"][-1] == "assistant"
