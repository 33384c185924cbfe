"""Binding running code to a session: ``with session:``, ``session.bound()`` and
``session.run(fn)``, which make ``llm()`` and agentic functions write into it.

A binding is kept per context (a ``ContextVar``), so blocks open in concurrent tasks and
threads never undo each other's. A ``Session`` holds one ``Binding`` of itself, which needs
nothing else of the session.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import Any, Generic, TypeVar

from graph import TOP, Frame
from openprogram._errors import SessionError
from openprogram._runtime._current import FRAME

T = TypeVar("T")

_ENTERED: ContextVar[tuple[tuple[Binding[Any], Any, Frame], ...]] = ContextVar(
    "openprogram_entered", default=()
)
"""``with session:`` blocks open in this thread or task: (binding, the value and frame
bound before it). Kept per context, so blocks in concurrent tasks and threads never undo
each other's bindings."""


class Binding(Generic[T]):
    """Binds ``value`` (a :class:`~openprogram.Session`) to ``variable`` (``SESSION``) and
    the top-level frame to ``FRAME`` for running code, as ``with session:`` does."""

    def __init__(self, value: T, variable: ContextVar[T | None]) -> None:
        self.value = value
        self.variable = variable

    def enter(self) -> None:
        _ENTERED.set((*_ENTERED.get(), (self, self.variable.get(), FRAME.get())))
        self.variable.set(self.value)
        FRAME.set(TOP)

    def exit(self) -> None:
        entered = _ENTERED.get()
        if not entered or entered[-1][0] is not self:
            raise SessionError(f"{self.value!r} is not the session this code entered last")
        _, value, frame = entered[-1]
        _ENTERED.set(entered[:-1])
        self.variable.set(value)
        FRAME.set(frame)

    def run(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn`` (sync or async) bound; an async one runs to completion here, on a
        worker thread when this thread already runs an event loop (a notebook)."""
        self.enter()
        try:
            result = fn(*args, **kwargs)
            if not inspect.isawaitable(result):
                return result
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return asyncio.run(_await(result))
            context = contextvars.copy_context()
            with ThreadPoolExecutor(1, thread_name_prefix="openprogram-run") as pool:
                return pool.submit(context.run, asyncio.run, _await(result)).result()
        finally:
            self.exit()


async def _await(value: Any) -> Any:
    return await value
