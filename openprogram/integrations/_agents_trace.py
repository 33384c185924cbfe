"""One OpenTelemetry trace per OpenAI Agents SDK run (used by ``openai_agents``).

The SDK traces with a tracer of its own, not OpenTelemetry, so ``OpenProgramSession.run``
opens the ``invoke_agent`` span itself, the root of the run's trace. Each model call is a
``chat`` span under it: opened where the session's ``input_filter`` receives the call (the
render that shapes the request is its ``render_context`` child) and closed by the SDK's
``RunHooks.on_llm_end`` with the response id, usage and finish reasons. The SDK's response
carries no finish reason, so it is read off the output: ``tool_calls`` when the model
called a tool, ``length`` for a message it left incomplete, else ``stop``.

A run wired by hand (``Runner.run`` with the session's filter, without its hooks) gets
``render_context`` spans only, as before: nothing would close a ``chat`` span there.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from agents import Agent, Model, RunContextWrapper, RunHooks
from agents.items import ModelResponse, TResponseInputItem
from agents.models import get_default_model

from openprogram import tracing

__all__ = ["TracedHooks", "chat", "finish_reasons", "model_name", "response_id", "traced_run"]

OPENAI_MODULES = ("agents.models.openai",)
"""Where the SDK's own OpenAI models live (their provider is OpenAI)."""


@dataclass
class _Run:
    """One traced run: the conversation its spans name, and the ``chat`` span open."""

    session: str
    conversation: str
    open: Any = None


_RUN: contextvars.ContextVar[_Run | None] = contextvars.ContextVar("openprogram_agents_run")


class _Unfinished(Exception):
    """A model call whose ``on_llm_end`` never came (it failed, or the run was cut)."""


@contextmanager
def traced_run(agent: Agent[Any], session: str, conversation: str) -> Iterator[None]:
    """The run inside, under an ``invoke_agent`` span (a no-op while tracing is off)."""
    if not tracing.enabled():
        yield
        return
    run = _Run(session, conversation)
    token = _RUN.set(run)

    def attributes() -> dict[str, Any]:
        g = tracing.semconv()
        return {
            **tracing.conversation_attributes(session, conversation),
            g.GEN_AI_OPERATION_NAME: g.GenAiOperationNameValues.INVOKE_AGENT.value,
            g.GEN_AI_AGENT_NAME: agent.name,
        }

    try:
        with tracing.span("invoke_agent", agent.name, attributes):
            try:
                yield
            finally:
                tracing.end(run.open, _Unfinished("the run ended first") if run.open else None)
                run.open = None
    finally:
        _RUN.reset(token)


def chat(agent: Agent[Any], configured: str | Model | None, name: str | None) -> Any:
    """Open the ``chat`` span of a model call of the current traced run (closed by
    :class:`TracedHooks`) to model ``name`` (``configured``: the run configuration's
    model, if any); None outside a traced run, or while tracing is off."""
    run = _RUN.get(None)
    if run is None or not tracing.enabled():
        return None
    tracing.end(run.open, _Unfinished("the next model call began") if run.open else None)
    model = name or "unknown"

    def attributes() -> dict[str, Any]:
        g = tracing.semconv()
        return {
            **tracing.conversation_attributes(run.session, run.conversation),
            g.GEN_AI_OPERATION_NAME: g.GenAiOperationNameValues.CHAT.value,
            g.GEN_AI_PROVIDER_NAME: _provider(
                configured if configured is not None else agent.model
            ),
            g.GEN_AI_REQUEST_MODEL: name,
            g.GEN_AI_AGENT_NAME: agent.name,
        }

    run.open = tracing.start("chat", model, attributes)
    return run.open


class TracedHooks(RunHooks[Any]):
    """The run's hooks: the caller's own (``inner``), and ``on_llm_end`` closing the call's
    ``chat`` span with what the response says."""

    def __init__(self, inner: RunHooks[Any] | None = None) -> None:
        self.inner = inner

    def __getattribute__(self, name: str) -> Any:
        # Every hook the SDK calls goes to the caller's hooks too; a hook added in a
        # later SDK version passes through the same way.
        if name.startswith("on_") and name not in ("on_llm_start", "on_llm_end"):
            inner = object.__getattribute__(self, "inner")
            if inner is not None:
                return getattr(inner, name)
        return object.__getattribute__(self, name)

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        if self.inner is not None:
            await self.inner.on_llm_start(context, agent, system_prompt, input_items)

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        run = _RUN.get(None)
        if run is not None and run.open is not None:
            g = tracing.semconv()
            usage = response.usage
            cached = usage.input_tokens_details.cached_tokens
            tracing.set_attributes(
                run.open,
                {
                    g.GEN_AI_RESPONSE_ID: response_id(response),
                    g.GEN_AI_RESPONSE_FINISH_REASONS: finish_reasons(response),
                    g.GEN_AI_USAGE_INPUT_TOKENS: usage.input_tokens,
                    g.GEN_AI_USAGE_OUTPUT_TOKENS: usage.output_tokens,
                    g.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: cached,
                },
            )
            tracing.end(run.open)
            run.open = None
        if self.inner is not None:
            await self.inner.on_llm_end(context, agent, response)


def response_id(response: ModelResponse) -> str | None:
    """The provider's id of the response: the Responses API's, or the Chat Completions id
    the SDK keeps in its output items' ``provider_data``."""
    if response.response_id:
        return response.response_id
    for item in response.output:
        data = _field(item, "provider_data")
        if isinstance(data, dict) and isinstance(data.get("response_id"), str):
            return str(data["response_id"])
    return None


def finish_reasons(response: ModelResponse) -> list[str]:
    """Why the model stopped, read off its output (see the module docstring)."""
    kinds = [_field(item, "type") for item in response.output]
    if any(kind and str(kind).endswith("_call") for kind in kinds):
        return ["tool_calls"]
    if any(_field(item, "status") == "incomplete" for item in response.output):
        return ["length"]
    return ["stop"]


def model_name(agent: Agent[Any], configured: str | Model | None = None) -> str | None:
    """The name of the model a call of ``agent`` goes to, as the SDK picks it: the run
    configuration's model, else the agent's, else the SDK's default; None for a model
    object that names none."""
    model = configured if configured is not None else agent.model
    if model is None:
        return get_default_model()
    if isinstance(model, str):
        return model or get_default_model()
    name = getattr(model, "model", None)
    return name if isinstance(name, str) and name else None


def _provider(model: Any) -> str:
    """The provider of a model object or name, as the SDK's providers read a name
    (``litellm/anthropic/…``, ``openai/…``, or a bare OpenAI model)."""
    if isinstance(model, str) or model is None:
        prefix, _, rest = (model or "").partition("/")
        if not rest or prefix == "openai":
            return "openai"
        return rest.partition("/")[0] if prefix == "litellm" and "/" in rest else prefix
    if type(model).__module__.startswith(OPENAI_MODULES):
        return "openai"
    return str(getattr(model, "provider", None) or "_OTHER")


def _field(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)
