"""``@openprogram.function``: a Python function that becomes a function node on every call.

The call's arguments are its input; its status goes running → completed (its return value
is the output) or error (the exception propagates). Calls nest: an agentic function called
inside another lands on the caller's chain, and its own LLM calls render from its frame.
``async def`` functions work too; siblings gathered concurrently chain in start order under
their caller, each with its own inner chain.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, overload

from pydantic import BaseModel

from graph import FunctionHandle
from openprogram._runtime._current import FRAME, MODEL, TOOL_NODE, current_frame
from openprogram._runtime._session import current_session
from openprogram.tracing import conversation_attributes, provider_name, semconv, span

F = TypeVar("F", bound=Callable[..., Any])


def _plain(value: Any) -> Any:
    """A value as JSON-able data (pydantic models dumped; the store reprs the rest)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


@contextmanager
def called(name: str, expose: str, input: Any) -> Iterator[FunctionHandle]:
    """Run a block as one call of an agentic function (what the decorator does)."""
    session = current_session()
    graph = session.graph
    handle = graph.start_function(
        name, input, expose, frame=current_frame(), spawned_by=TOOL_NODE.get()
    )
    session.leases.take(handle.id)
    frame_token = FRAME.set(handle.frame)
    tool_token = TOOL_NODE.set(None)

    def attributes() -> dict[str, Any]:
        g = semconv()
        model = MODEL.get() or session.model
        return {
            **conversation_attributes(session.id),
            g.GEN_AI_OPERATION_NAME: g.GenAiOperationNameValues.INVOKE_AGENT.value,
            g.GEN_AI_PROVIDER_NAME: provider_name(model) if model is not None else None,
            g.GEN_AI_REQUEST_MODEL: model.name if model is not None else None,
            g.GEN_AI_AGENT_NAME: name,
            g.GEN_AI_AGENT_ID: handle.id,
            "openprogram.function.expose": expose,
        }

    try:
        with span("invoke_agent", name, attributes):
            try:
                yield handle
            except BaseException as error:
                session.leases.check([handle.id])  # LeaseLost, not another's work finished
                graph.finish_function(handle, error=error)
                raise
            else:
                session.leases.check([handle.id])
                graph.finish_function(handle, output=_plain(handle.output))
    finally:
        TOOL_NODE.reset(tool_token)
        FRAME.reset(frame_token)
        session.leases.release(handle.id)


def _input(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return {"args": _plain(list(args)), "kwargs": _plain(kwargs)}
    bound.apply_defaults()
    return {name: _plain(value) for name, value in bound.arguments.items()}


@overload
def function(fn: F, /) -> F: ...


@overload
def function(*, expose: str = "io", name: str | None = None) -> Callable[[F], F]: ...


def function(
    fn: Callable[..., Any] | None = None, /, *, expose: str = "io", name: str | None = None
) -> Any:
    """Make ``fn`` an agentic function: each call is a function node of the session.

    ``expose`` says what callers see once it finished: ``io`` (input and output, the
    default), ``full``, ``llm`` (only its LLM turns) or ``hidden``.

    >>> import openprogram
    >>> @openprogram.function
    ... def double(x: int) -> int:
    ...     return 2 * x
    >>> with openprogram.Session(":memory:") as session:
    ...     double(21), session.graph.nodes()[0].payload.name, session.graph.nodes()[0].output
    (42, 'double', 42)
    """

    def decorate(target: Callable[..., Any]) -> Callable[..., Any]:
        label: str = name or str(getattr(target, "__name__", "function"))
        signature = inspect.signature(target)
        if inspect.iscoroutinefunction(target):

            @functools.wraps(target)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                with called(label, expose, _input(signature, args, kwargs)) as handle:
                    handle.output = await target(*args, **kwargs)
                return handle.output

            return run_async

        @functools.wraps(target)
        def run(*args: Any, **kwargs: Any) -> Any:
            with called(label, expose, _input(signature, args, kwargs)) as handle:
                handle.output = target(*args, **kwargs)
            return handle.output

        return run

    return decorate(fn) if fn is not None else decorate
