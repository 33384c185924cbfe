"""OpenTelemetry spans for agent runs, following the GenAI semantic conventions — opt-in.

Tracing is off until :func:`enable` is called or ``OPENPROGRAM_TRACING=1`` is set: having
``opentelemetry-api`` installed is not enough (it arrives with other packages), and while
off nothing of OpenTelemetry is imported and a span costs one flag test.

What is emitted (attribute names are the constants of ``opentelemetry-semantic-conventions``;
``gen_ai.conversation.id`` is the session id, or under an adapter the framework's own
conversation id, with ``openprogram.session.id`` beside it):

- ``invoke_agent {name}`` for each agentic function (``@function``), the parent of the
  calls inside it, so a trace viewer shows the tree ``openprogram show`` prints; the
  LangChain middleware opens one per agent invocation (LangChain has no OpenTelemetry of
  its own), and under Pydantic AI with ``instrument=True`` our spans nest in its own;
- ``chat {model}`` for each model call: the provider, request and response model,
  response id, finish reasons and the usage the provider reported (input, output, cache
  read, cache creation tokens);
- ``execute_tool {name}`` for each tool run;
- ``render_context`` for each render, with ``openprogram.render.*`` attributes (tokens
  before and after the cascade, the budget, the tiers that acted) and one
  ``openprogram.compaction`` event per compaction (tier, layer id, tokens): the
  conventions (``opentelemetry-semantic-conventions`` 0.66b2) define no compaction event
  yet, so the name is ours.

>>> from openprogram import tracing
>>> tracing.enabled()
False
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["ENV", "disable", "enable", "enabled", "provider_name", "span"]

ENV = "OPENPROGRAM_TRACING"
"""Set to ``1``/``true``/``on`` to trace without calling :func:`enable`."""

INSTRUMENTATION = "openprogram"

_tracer: Any = None
_state: bool | None = None
"""None: not decided yet (the environment is read on first use)."""


def enable(tracer_provider: Any = None) -> None:
    """Emit spans from now on, through ``tracer_provider`` (the global one by default)."""
    global _tracer, _state
    try:
        from opentelemetry import trace
    except ImportError as error:
        from openprogram._errors import MissingExtra

        raise MissingExtra(
            "tracing needs OpenTelemetry, which is not installed: "
            f"pip install 'openprogram[otel]' ({error})"
        ) from error

    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    _tracer = provider.get_tracer(INSTRUMENTATION)
    _state = True


def disable() -> None:
    """Stop emitting spans (``OPENPROGRAM_TRACING`` is not read again)."""
    global _tracer, _state
    _tracer = None
    _state = False


def enabled() -> bool:
    """Whether spans are emitted: :func:`enable` was called, or the variable is set."""
    if _state is None:
        if os.environ.get(ENV, "").strip().lower() in ("1", "true", "on", "yes"):
            enable()
        else:
            disable()
    return bool(_state)


_KINDS = {"chat": "CLIENT"}


Attributes = Mapping[str, Any] | Callable[[], Mapping[str, Any]]
"""A span's attributes, or a function that makes them (called only while tracing is on,
so that the conventions' names, which import OpenTelemetry, are looked up only then)."""


def semconv() -> Any:
    """The GenAI attribute names of ``opentelemetry-semantic-conventions``."""
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes

    return gen_ai_attributes


@contextmanager
def span(
    operation: str, target: str | None = None, attributes: Attributes | None = None
) -> Iterator[Any]:
    """A span named ``{operation} {target}`` (the conventions' naming), current while the
    block runs; yields it (``None`` when tracing is off). An exception leaving the block
    marks the span as an error."""
    if not enabled():
        yield None
        return
    from opentelemetry.trace import SpanKind

    name = f"{operation} {target}" if target else operation
    kind = getattr(SpanKind, _KINDS.get(operation, "INTERNAL"))
    with _tracer.start_as_current_span(
        name, kind=kind, record_exception=True, set_status_on_exception=False
    ) as current:
        set_attributes(current, attributes() if callable(attributes) else attributes or {})
        try:
            yield current
        except BaseException as error:
            failed(current, error)
            raise


def failed(current: Any, error: BaseException) -> None:
    """Mark ``current`` as failed by ``error`` (status and ``error.type``)."""
    from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
    from opentelemetry.trace import Status, StatusCode

    current.set_status(Status(StatusCode.ERROR, str(error)[:500]))
    current.set_attribute(ERROR_TYPE, type(error).__qualname__)


def start(operation: str, target: str | None = None, attributes: Attributes | None = None) -> Any:
    """A span that is not made current (ended by :func:`end`), for a framework whose hooks
    open and close an operation in two calls; ``None`` when tracing is off."""
    if not enabled():
        return None
    from opentelemetry.trace import SpanKind

    name = f"{operation} {target}" if target else operation
    kind = getattr(SpanKind, _KINDS.get(operation, "INTERNAL"))
    current = _tracer.start_span(name, kind=kind)
    set_attributes(current, attributes() if callable(attributes) else attributes or {})
    return current


def end(current: Any, error: BaseException | None = None) -> None:
    """End a span from :func:`start` (failed by ``error`` if given); ``None`` is a no-op."""
    if current is None:
        return
    if error is not None:
        failed(current, error)
    current.end()


@contextmanager
def under(parent: Any) -> Iterator[None]:
    """Make ``parent`` (a span from :func:`start`, or ``None``) the current span in the
    block, so the spans opened there are its children."""
    if parent is None:
        yield
        return
    from opentelemetry import trace

    with trace.use_span(parent, end_on_exit=False):
        yield


def set_attributes(current: Any, attributes: Mapping[str, Any]) -> None:
    """Set the attributes that have a value (OpenTelemetry takes no ``None``)."""
    if current is None:
        return
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, Sequence) and not isinstance(value, str):
            value = [str(v) for v in value]
        current.set_attribute(key, value)


def render_attributes(rendered: Any) -> dict[str, Any]:
    """``openprogram.render.*`` attributes of one render (a ``context.Rendered``)."""
    actions = list(rendered.actions)
    before = actions[0].tokens_before if actions else rendered.tokens
    return {
        "openprogram.render.tokens_before": before,
        "openprogram.render.tokens": rendered.tokens,
        "openprogram.render.budget": rendered.budget,
        "openprogram.render.messages": len(rendered.messages),
        "openprogram.render.tiers": list(dict.fromkeys(a.tier for a in actions)),
    }


def record_render(current: Any, rendered: Any) -> None:
    """Describe a finished render on its span: attributes and one event per compaction."""
    if current is None:
        return
    set_attributes(current, render_attributes(rendered))
    for record in rendered.records:
        event = {
            "openprogram.compaction.tier": record.tier,
            "openprogram.compaction.record_id": record.id,
            "openprogram.compaction.layer_id": record.details.get("layer"),
            "openprogram.compaction.tokens_before": record.tokens_before,
            "openprogram.compaction.tokens_after": record.tokens_after,
            "openprogram.compaction.error": record.error,
        }
        current.add_event(
            "openprogram.compaction", {k: v for k, v in event.items() if v is not None}
        )


def conversation_attributes(session: str, conversation: str | None = None) -> dict[str, Any]:
    """The conversation id (the framework's, when it has one; else the session id) and
    the session id."""
    return {
        semconv().GEN_AI_CONVERSATION_ID: conversation or session,
        "openprogram.session.id": session,
    }


def traced_render(
    render: Callable[[], Any],
    session: str,
    *,
    recovery: bool = False,
    conversation: str | None = None,
) -> Any:
    """Run ``render`` (a render of session ``session``) in a ``render_context`` span that
    says what it did; just ``render()`` while tracing is off. ``conversation``: the
    framework's conversation id, when an adapter renders."""
    attributes = lambda: conversation_attributes(session, conversation)  # noqa: E731
    with span("render_context", None, attributes) as current:
        if recovery:
            set_attributes(current, {"openprogram.render.recovery": True})
        rendered = render()
        record_render(current, rendered)
    return rendered


def usage_attributes(usage: Any) -> dict[str, Any]:
    """The conventions' usage attributes from a runtime ``Usage``."""
    g = semconv()
    return {
        g.GEN_AI_USAGE_INPUT_TOKENS: usage.input_tokens,
        g.GEN_AI_USAGE_OUTPUT_TOKENS: usage.output_tokens,
        g.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: usage.cached_tokens,
        g.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: usage.cache_written,
    }


def response_attributes(response: Any) -> dict[str, Any]:
    """A runtime ``ModelResponse``'s usage, model, id and finish reason."""
    g = semconv()
    return {
        **usage_attributes(response.usage),
        g.GEN_AI_RESPONSE_MODEL: response.model or None,
        g.GEN_AI_RESPONSE_ID: response.id or None,
        g.GEN_AI_RESPONSE_FINISH_REASONS: [response.finish_reason]
        if response.finish_reason
        else None,
    }


_LITELLM_PROVIDERS = {
    "openai": "OPENAI",
    "text-completion-openai": "OPENAI",
    "anthropic": "ANTHROPIC",
    "gemini": "GCP_GEMINI",
    "vertex_ai": "GCP_VERTEX_AI",
    "vertex_ai_beta": "GCP_VERTEX_AI",
    "bedrock": "AWS_BEDROCK",
    "azure": "AZURE_AI_OPENAI",
    "azure_ai": "AZURE_AI_INFERENCE",
    "cohere": "COHERE",
    "cohere_chat": "COHERE",
    "mistral": "MISTRAL_AI",
    "groq": "GROQ",
    "deepseek": "DEEPSEEK",
    "xai": "X_AI",
    "perplexity": "PERPLEXITY",
    "watsonx": "IBM_WATSONX_AI",
}


def provider_name(model: Any) -> str:
    """``gen_ai.provider.name`` of a model: its ``provider`` if it says, else what litellm
    makes of its name, as the conventions' well-known value where there is one (litellm's
    name otherwise; ``_OTHER`` when nothing is known)."""
    given = getattr(model, "provider", None)
    if isinstance(given, str) and given:
        return given
    name = str(getattr(model, "name", "") or "")
    provider = name.split("/", 1)[0] if "/" in name else ""
    if not provider and name:
        try:
            from context import import_litellm

            provider = str(import_litellm().get_llm_provider(name)[1])
        except Exception:  # a name litellm does not know
            provider = ""
    if not provider:
        return "_OTHER"
    from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
        GenAiProviderNameValues,
    )

    known = _LITELLM_PROVIDERS.get(provider)
    return str(getattr(GenAiProviderNameValues, known).value) if known else provider
