"""OpenTelemetry under the adapters, through the frameworks' own agent runs and an in-memory
exporter: one trace per run, our spans nested in the framework's (Pydantic AI instruments
itself) or in the ``invoke_agent`` span the LangChain middleware opens (LangChain does
not), and the framework's conversation id on our spans too."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _adapter_helpers import ROUNDS, lookup, small_session
from _fake_provider import FakeProvider
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_CONVERSATION_ID,
    GEN_AI_OPERATION_NAME,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_ID,
    GenAiOperationNameValues,
)

from openprogram import tracing


@pytest.fixture
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exported = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exported))
    tracing.enable(tracer_provider)
    try:
        yield tracer_provider, exported
    finally:
        tracing.disable()
        tracer_provider.shutdown()


def _by_id(spans: tuple[ReadableSpan, ...]) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in spans}


def _parent(span: ReadableSpan, spans: dict[int, ReadableSpan]) -> ReadableSpan | None:
    return spans.get(span.parent.span_id) if span.parent is not None else None


def _ancestors(span: ReadableSpan, spans: dict[int, ReadableSpan]) -> list[str]:
    names = []
    parent = _parent(span, spans)
    while parent is not None:
        names.append(parent.name)
        parent = _parent(parent, spans)
    return names


def test_pydantic_ai_instrumented_run_holds_our_renders(
    provider: tuple[TracerProvider, InMemorySpanExporter], tmp_path: Path
) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    from openprogram.integrations.pydantic_ai import OpenProgramCapability

    tracer_provider, exported = provider
    turns = iter(range(1, ROUNDS + 2))

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = next(turns)
        if turn <= ROUNDS:
            return ModelResponse(parts=[ToolCallPart("lookup", {"key": f"k_{turn}"}, f"c{turn}")])
        return ModelResponse(parts=[TextPart("done")])

    session = small_session(tmp_path)
    agent = Agent(
        FunctionModel(script),
        tools=[lookup],
        capabilities=[
            OpenProgramCapability(session),
            Instrumentation(settings=InstrumentationSettings(tracer_provider=tracer_provider)),
        ],
    )
    result = agent.run_sync("Look up k_1 to k_10.")
    assert result.output == "done"
    spans = exported.get_finished_spans()
    by_id = _by_id(spans)
    assert len({s.context.trace_id for s in spans}) == 1
    renders = [s for s in spans if s.name == "render_context"]
    assert len(renders) == ROUNDS + 1
    assert any((s.attributes or {}).get("openprogram.render.tiers") for s in renders)
    for render in renders:
        parent = _parent(render, by_id)
        assert parent is not None and parent.name.startswith("chat ")
        assert _ancestors(render, by_id)[-1].startswith("invoke_agent")
    # One conversation id on every span that carries one: Pydantic AI's.
    conversation = {
        (s.attributes or {})[GEN_AI_CONVERSATION_ID]
        for s in spans
        if GEN_AI_CONVERSATION_ID in (s.attributes or {})
    }
    assert conversation == {result.conversation_id}
    assert {(s.attributes or {})["openprogram.session.id"] for s in renders} == {session.id}


class _Chat:
    """LangChain's fake chat model, answering with finish reasons and usage as a provider
    would (tools bound as is)."""

    @staticmethod
    def make() -> Any:
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage

        class Fake(GenericFakeChatModel):
            def bind_tools(self, tools: Any, **kwargs: Any) -> Fake:  # type: ignore[override]
                return self

        def script() -> Iterator[AIMessage]:
            for turn in range(1, ROUNDS + 1):
                call = {"name": "lookup", "args": {"key": f"k_{turn}"}, "id": f"c{turn}"}
                yield AIMessage(
                    content="",
                    tool_calls=[call],
                    response_metadata={"finish_reason": "tool_calls", "id": f"resp-{turn}"},
                    usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
                )
            yield AIMessage(
                content="done",
                response_metadata={"finish_reason": "stop", "id": "resp-last"},
                usage_metadata={"input_tokens": 10, "output_tokens": 1, "total_tokens": 11},
            )

        return Fake(messages=script())


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_a_langchain_invocation_is_one_trace(
    provider: tuple[TracerProvider, InMemorySpanExporter], tmp_path: Path, run: str
) -> None:
    pytest.importorskip("langchain")
    from langchain.agents import create_agent

    from openprogram.integrations.langchain import OpenProgramMiddleware

    _, exported = provider
    session = small_session(tmp_path)
    agent = create_agent(_Chat.make(), tools=[lookup], middleware=[OpenProgramMiddleware(session)])
    task = {"messages": [{"role": "user", "content": "Look up k_1 to k_10."}]}
    config = {"configurable": {"thread_id": "thread-7"}}
    if run == "invoke":
        state = agent.invoke(task, config)  # type: ignore[arg-type]
    else:
        state = asyncio.run(agent.ainvoke(task, config))  # type: ignore[arg-type]
    assert state["messages"][-1].content == "done"
    spans = exported.get_finished_spans()
    by_id = _by_id(spans)
    assert len({s.context.trace_id for s in spans}) == 1
    roots = [s for s in spans if s.parent is None]
    assert [s.name for s in roots] == ["invoke_agent"]
    root = dict(roots[0].attributes or {})
    assert root[GEN_AI_OPERATION_NAME] == GenAiOperationNameValues.INVOKE_AGENT.value
    assert root[GEN_AI_PROVIDER_NAME]
    renders = [s for s in spans if s.name == "render_context"]
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(renders) == len(chats) == ROUNDS + 1
    assert all(_parent(s, by_id) is roots[0] for s in [*renders, *chats])
    reasons = [tuple((s.attributes or {})[GEN_AI_RESPONSE_FINISH_REASONS]) for s in chats]
    assert reasons == [("tool_calls",)] * ROUNDS + [("stop",)]
    assert (chats[-1].attributes or {})[GEN_AI_RESPONSE_ID] == "resp-last"
    for span in spans:
        attributes = span.attributes or {}
        assert attributes[GEN_AI_CONVERSATION_ID] == "thread-7"
        assert attributes["openprogram.session.id"] == session.id


def test_a_langchain_middleware_built_while_tracing_is_off_adds_no_graph_nodes(
    tmp_path: Path,
) -> None:
    pytest.importorskip("langchain")
    from langchain.agents import create_agent

    from openprogram.integrations.langchain import OpenProgramMiddleware

    hooks = {"OpenProgramMiddleware.before_agent", "OpenProgramMiddleware.after_agent"}
    session = small_session(tmp_path)
    assert not tracing.enabled()
    untraced = OpenProgramMiddleware(session)
    agent = create_agent(_Chat.make(), tools=[lookup], middleware=[untraced])
    assert isinstance(untraced, OpenProgramMiddleware)
    assert untraced.name == "OpenProgramMiddleware"
    assert not hooks & set(agent.get_graph().nodes)  # no hook nodes a request would pass
    task = {"messages": [{"role": "user", "content": "Look up k_1 to k_10."}]}
    assert agent.invoke(task)["messages"][-1].content == "done"  # type: ignore[arg-type]
    tracing.enable(TracerProvider())
    try:
        traced = create_agent(_Chat.make(), middleware=[OpenProgramMiddleware(session)])
        assert hooks <= set(traced.get_graph().nodes)
    finally:
        tracing.disable()


def test_each_agents_sdk_run_is_one_trace(
    provider: tuple[TracerProvider, InMemorySpanExporter],
    tmp_path: Path,
    fake_provider: FakeProvider,
) -> None:
    """The Agents SDK traces with its own (non-OpenTelemetry) tracer; ``memory.run`` opens
    an ``invoke_agent`` root per run, a ``chat`` span per model call (closed by the SDK's
    ``on_llm_end`` with the response id and finish reasons) and the render under it. The
    caller's own hooks still run."""
    pytest.importorskip("agents")
    from agents import Agent, OpenAIChatCompletionsModel, RunHooks, function_tool
    from agents.tracing import set_tracing_disabled
    from openai import AsyncOpenAI

    from openprogram.integrations.openai_agents import OpenProgramSession

    _, exported = provider
    set_tracing_disabled(True)
    session = small_session(tmp_path)
    memory = OpenProgramSession(session, "sdk-conversation-3")
    client = AsyncOpenAI(base_url=fake_provider.base_url, api_key="test-key", max_retries=0)
    model = OpenAIChatCompletionsModel("gpt-4o-mini", client)
    agent = Agent("helper", tools=[function_tool(lookup)], model=model)
    ended: list[str] = []

    class Mine(RunHooks[Any]):
        async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
            ended.append(str(output))

    async def runs() -> list[Any]:
        try:
            fake_provider.reply_tool_call("lookup", '{"key": "k_1"}')
            fake_provider.reply("found k_1")
            first = await memory.run(agent, "Look up k_1.", hooks=Mine())
            fake_provider.reply("done")
            return [first, await memory.run(agent, "Thanks.")]
        finally:
            await client.close()

    assert [r.final_output for r in asyncio.run(runs())] == ["found k_1", "done"]
    assert ended == ["found k_1"]
    spans = exported.get_finished_spans()
    by_id = _by_id(spans)
    roots = [s for s in spans if s.parent is None]
    assert [s.name for s in roots] == ["invoke_agent helper"] * 2
    assert len({s.context.trace_id for s in spans}) == 2
    for root, calls in zip(roots, (2, 1), strict=True):
        own = [s for s in spans if s.context.trace_id == root.context.trace_id]
        chats = [s for s in own if s.name == "chat gpt-4o-mini"]
        renders = [s for s in own if s.name == "render_context"]
        assert len(chats) == len(renders) == calls
        assert all(_parent(c, by_id) is root for c in chats)
        assert [_parent(r, by_id) for r in renders] == chats
        for chat in chats:
            attributes = chat.attributes or {}
            assert str(attributes[GEN_AI_RESPONSE_ID]).startswith("chatcmpl-")
            assert attributes[GEN_AI_PROVIDER_NAME] == "openai"
        reasons = [tuple((c.attributes or {})[GEN_AI_RESPONSE_FINISH_REASONS]) for c in chats]
        assert reasons == [("tool_calls",), ("stop",)][2 - calls :]
        for span in own:
            attributes = span.attributes or {}
            assert attributes[GEN_AI_CONVERSATION_ID] == "sdk-conversation-3"
            assert attributes["openprogram.session.id"] == session.id
