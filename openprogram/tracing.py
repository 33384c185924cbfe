"""OpenTelemetry spans for agent runs, following the GenAI semantic conventions — opt-in.

Tracing is off until :func:`enable` is called or ``OPENPROGRAM_TRACING=1`` is set: having
``opentelemetry-api`` installed is not enough (it arrives with other packages), and while
off nothing of OpenTelemetry is imported and a span costs one flag test.

What is emitted (``gen_ai.conversation.id`` is the session id on every span):

- ``invoke_agent {name}`` for each agentic function (``@function``), the parent of the
  calls inside it, so a trace viewer shows the tree ``openprogram show`` prints;
- ``chat {model}`` for each model call, with the request model and the usage the provider
  reported (input, output, cache read, cache creation tokens);
- ``execute_tool {name}`` for each tool run;
- ``render_context`` for each render, with ``openprogram.render.*`` attributes (tokens
  before and after the cascade, the budget, the tiers that acted) and one
  ``openprogram.compaction`` event per compaction (tier, layer id, tokens).

>>> from openprogram import tracing
>>> tracing.enabled()
False
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["ENV", "disable", "enable", "enabled", "span"]

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


@contextmanager
def span(
    operation: str, target: str | None = None, attributes: Mapping[str, Any] | None = None
) -> Iterator[Any]:
    """A span named ``{operation} {target}`` (the conventions' naming), current while the
    block runs; yields it (``None`` when tracing is off). An exception leaving the block
    marks the span as an error."""
    if not enabled():
        yield None
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode

    name = f"{operation} {target}" if target else operation
    kind = getattr(SpanKind, _KINDS.get(operation, "INTERNAL"))
    with _tracer.start_as_current_span(
        name, kind=kind, record_exception=True, set_status_on_exception=False
    ) as current:
        set_attributes(current, attributes or {})
        try:
            yield current
        except BaseException as error:
            current.set_status(Status(StatusCode.ERROR, str(error)[:500]))
            current.set_attribute("error.type", type(error).__qualname__)
            raise


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


def traced_render(render: Callable[[], Any], conversation: str, *, recovery: bool = False) -> Any:
    """Run ``render`` (a render of session ``conversation``) in a ``render_context`` span
    that says what it did; just ``render()`` while tracing is off."""
    with span("render_context", None, {"gen_ai.conversation.id": conversation}) as current:
        if recovery:
            set_attributes(current, {"openprogram.render.recovery": True})
        rendered = render()
        record_render(current, rendered)
    return rendered


def usage_attributes(usage: Any) -> dict[str, Any]:
    """The conventions' usage attributes from a runtime ``Usage``."""
    return {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cached_tokens,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_written,
    }
