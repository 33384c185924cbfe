"""OpenTelemetry spans: the research example's span tree and its GenAI attributes, nothing
emitted while tracing is off, and nothing imported without opentelemetry."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_CONVERSATION_ID,
    GEN_AI_OPERATION_NAME,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_ID,
    GenAiOperationNameValues,
    GenAiProviderNameValues,
)
from opentelemetry.trace import SpanKind

from openprogram import LiteLLMModel, Session, function, llm, tracing
from openprogram.examples.corpus import QUESTIONS
from openprogram.examples.research import research, scripted_model
from openprogram.testing import TestModel, tool_call

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    tracing.enable(provider)
    try:
        yield exported
    finally:
        tracing.disable()
        provider.shutdown()


def _tree(spans: tuple[ReadableSpan, ...]) -> dict[int | None, list[ReadableSpan]]:
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent, []).append(span)
    return children


def test_the_research_example_traces_as_the_function_tree(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    session = Session(tmp_path / "r.db", model=scripted_model(), system="You are careful.")
    with session:
        answer = session.run(research, next(iter(QUESTIONS)))
    assert answer
    spans = exporter.get_finished_spans()
    children = _tree(spans)
    roots = children[None]
    assert [s.name for s in roots] == ["invoke_agent research"]
    root = roots[0]
    top = session.graph.nodes()
    research_node = next(n for n in top if n.kind == "function" and n.payload.name == "research")
    assert root.attributes is not None
    assert root.attributes["gen_ai.agent.id"] == research_node.id
    assert root.attributes["gen_ai.conversation.id"] == session.id
    # Each function node is the parent span of the functions it called, as `show` nests them.
    by_id = {
        s.attributes["gen_ai.agent.id"]: s
        for s in spans
        if s.attributes and "gen_ai.agent.id" in s.attributes
    }
    functions = [n for n in top if n.kind == "function"]
    assert set(by_id) == {n.id for n in functions}
    for node in functions:
        caller = session.graph.caller(node.id)
        span = by_id[node.id]
        if caller is None:
            assert span.parent is None
        else:
            assert span.parent is not None
            assert span.parent.span_id == by_id[caller.id].context.span_id
    # Model calls are chat spans inside their function, each after a render of its frame.
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert chats and all(s.kind == SpanKind.CLIENT for s in chats)
    assistant_turns = [n for n in top if n.role == "assistant"]
    assert len(chats) == len(assistant_turns)
    for chat in chats:
        attributes = chat.attributes or {}
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.request.model"] == "scripted-research"
        assert attributes["gen_ai.conversation.id"] == session.id
        assert attributes["gen_ai.usage.input_tokens"] > 0
        assert "gen_ai.usage.output_tokens" in attributes
        assert chat.parent is not None
        parent = next(s for s in spans if s.context.span_id == chat.parent.span_id)
        assert parent.name.startswith("invoke_agent ")
    renders = [s for s in spans if s.name == "render_context"]
    assert len(renders) >= len(chats)
    for render in renders:
        attributes = render.attributes or {}
        assert attributes["openprogram.render.tokens"] <= attributes["openprogram.render.budget"]
        assert attributes["openprogram.render.tokens_before"] >= 0
    tools = [s for s in spans if s.name.startswith("execute_tool ")]
    assert {s.name for s in tools} >= {"execute_tool search", "execute_tool read"}
    for tool in tools:
        attributes = tool.attributes or {}
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["gen_ai.tool.call.id"]
        assert session.graph.get(str(attributes["openprogram.node.id"])).kind == "tool"


def test_compactions_are_events_on_their_render(exporter: InMemorySpanExporter) -> None:
    def read(path: str) -> str:
        """Read a file."""
        return f"{path}: " + "line of the file\n" * 2_000

    turns = [{"tool_calls": [tool_call("read", {"path": f"f{i}.py"})]} for i in range(12)]
    model = TestModel([*turns, "done"])
    with Session(":memory:", model=model, system="Be brief.", budget=2_500) as session:
        assert llm("Read every file.", tools=[read]) == "done"
    events = [
        (span, event)
        for span in exporter.get_finished_spans()
        if span.name == "render_context"
        for event in span.events
    ]
    assert events
    records = {r.id: r for r in session.engine.records()}
    for span, event in events:
        attributes = event.attributes or {}
        assert event.name == "openprogram.compaction"
        record = records[str(attributes["openprogram.compaction.record_id"])]
        assert attributes["openprogram.compaction.tier"] == record.tier
        assert attributes["openprogram.compaction.tokens_after"] == record.tokens_after
        assert record.tier in ((span.attributes or {}).get("openprogram.render.tiers") or ())
    layered = [e for _, e in events if "openprogram.compaction.layer_id" in (e.attributes or {})]
    layer_ids = {layer.id for layer in session.graph.layers()}
    assert all(
        str((e.attributes or {})["openprogram.compaction.layer_id"]) in layer_ids for e in layered
    )


def test_nothing_is_emitted_while_tracing_is_off() -> None:
    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    tracing.enable(provider)
    tracing.disable()

    @function
    def ask() -> str:
        return str(llm("hi"))

    with Session(":memory:", model=TestModel(["hello"])):
        assert ask() == "hello"
    assert exported.get_finished_spans() == ()
    provider.shutdown()


def test_without_opentelemetry_nothing_is_imported_and_agents_run() -> None:
    script = textwrap.dedent(
        """
        import sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ImportError("blocked: " + name)
                return None

        sys.meta_path.insert(0, Block())
        from openprogram import LiteLLMModel, Session, function, llm, tracing
        from openprogram.testing import TestModel

        @function
        def ask() -> str:
            return str(llm("hi"))

        with Session(":memory:", model=TestModel(["hello"])):
            assert ask() == "hello"
        assert not tracing.enabled()
        assert not [m for m in sys.modules if m.startswith("opentelemetry")]
        try:
            tracing.enable()
        except ImportError as error:
            print("enable:", error)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENPROGRAM_TRACING": ""}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'openprogram[otel]'" in done.stdout  # what to do, then the cause
    assert "(blocked: opentelemetry)" in done.stdout


def test_the_environment_variable_switches_tracing_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "_state", None)
    monkeypatch.setenv(tracing.ENV, "1")
    try:
        assert tracing.enabled()
    finally:
        tracing.disable()
    monkeypatch.setattr(tracing, "_state", None)
    monkeypatch.setenv(tracing.ENV, "0")
    assert not tracing.enabled()


def test_an_adapter_s_renders_are_traced(exporter: InMemorySpanExporter, tmp_path: Path) -> None:
    from openprogram.integrations import Entry, Mirror

    session = Session(tmp_path / "a.db", budget=2_000)
    mirror = Mirror(session, "test")
    entries = [
        Entry({"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " * 150})
        for i in range(12)
    ]
    mirror.render(entries)
    renders = [s for s in exporter.get_finished_spans() if s.name == "render_context"]
    assert len(renders) == 1
    attributes = renders[0].attributes or {}
    assert attributes["gen_ai.conversation.id"] == session.id
    tokens, before = (
        attributes["openprogram.render.tokens"],
        attributes["openprogram.render.tokens_before"],
    )
    assert tokens <= 2_000 < before


def _required(span: ReadableSpan, *names: str) -> dict[str, Any]:
    attributes = dict(span.attributes or {})
    missing = [name for name in names if name not in attributes]
    assert not missing, (span.name, missing)
    return attributes


def test_spans_carry_the_conventions_required_attributes(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    """``chat`` and ``invoke_agent`` have ``gen_ai.provider.name`` (required), ``chat`` the
    response id and finish reasons, all under the conventions' own names; a litellm model
    (mock_response: no provider is reached) is named by its well-known provider value."""

    @function
    def ask(question: str) -> str:
        return str(llm(question))

    model = LiteLLMModel("openai/gpt-4o-mini", mock_response="the answer")
    with Session(tmp_path / "c.db", model=model) as session:
        assert ask("What is it?") == "the answer"
    spans = {s.name: s for s in exporter.get_finished_spans()}
    chat = _required(
        spans["chat openai/gpt-4o-mini"],
        GEN_AI_OPERATION_NAME,
        GEN_AI_PROVIDER_NAME,
        GEN_AI_REQUEST_MODEL,
        GEN_AI_RESPONSE_ID,
        GEN_AI_RESPONSE_FINISH_REASONS,
        GEN_AI_CONVERSATION_ID,
    )
    assert chat[GEN_AI_OPERATION_NAME] == GenAiOperationNameValues.CHAT.value
    assert chat[GEN_AI_PROVIDER_NAME] == GenAiProviderNameValues.OPENAI.value
    assert str(chat[GEN_AI_RESPONSE_ID]).startswith("chatcmpl-")
    assert tuple(chat[GEN_AI_RESPONSE_FINISH_REASONS]) == ("stop",)
    agent = _required(spans["invoke_agent ask"], GEN_AI_OPERATION_NAME, GEN_AI_PROVIDER_NAME)
    assert agent[GEN_AI_OPERATION_NAME] == GenAiOperationNameValues.INVOKE_AGENT.value
    assert agent[GEN_AI_PROVIDER_NAME] == GenAiProviderNameValues.OPENAI.value
    assert agent[GEN_AI_CONVERSATION_ID] == chat[GEN_AI_CONVERSATION_ID] == session.id


def test_a_fake_model_s_chat_spans_say_why_it_stopped(exporter: InMemorySpanExporter) -> None:
    def read(path: str) -> str:
        """Read a file."""
        return path

    model = TestModel([{"tool_calls": [tool_call("read", {"path": "a.py"})]}, "done"])
    with Session(":memory:", model=model):
        assert llm("Read a.py.", tools=[read]) == "done"
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    reasons = [tuple((s.attributes or {})[GEN_AI_RESPONSE_FINISH_REASONS]) for s in chats]
    assert reasons == [("tool_calls",), ("stop",)]
    assert [(s.attributes or {})[GEN_AI_PROVIDER_NAME] for s in chats] == [
        "openprogram.testing"
    ] * 2
    assert len({(s.attributes or {})[GEN_AI_RESPONSE_ID] for s in chats}) == 2
