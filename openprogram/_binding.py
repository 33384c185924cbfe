"""Binding running code to a session: ``with session:``, ``session.bound()`` and
``session.run(fn)``, which make ``llm()`` and agentic functions write into it.

A binding is kept per context (a ``ContextVar``), so blocks open in concurrent tasks and
threads never undo each other's; apart from ``Session`` because it needs none of its state.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Self, cast

from graph import TOP, Frame
from openprogram._current import FRAME, SESSION
from openprogram._errors import SessionError

if TYPE_CHECKING:
    from openprogram._session import Session

_ENTERED: ContextVar[tuple[tuple[Binding, Session | None, Frame], ...]] = ContextVar(
    "openprogram_entered", default=()
)
"""``with session:`` blocks open in this thread or task: (session, the session and frame
bound before it). Kept per context, so blocks in concurrent tasks and threads never undo
each other's bindings."""


class Binding:
    """How :class:`~openprogram.Session` binds running code (``SESSION`` and ``FRAME``)."""

    def __enter__(self) -> Self:
        _ENTERED.set((*_ENTERED.get(), (self, SESSION.get(), FRAME.get())))
        SESSION.set(cast("Session", self))  # only Session binds
        FRAME.set(TOP)
        return self

    def __exit__(self, *exc: object) -> None:
        entered = _ENTERED.get()
        if not entered or entered[-1][0] is not self:
            raise SessionError(f"{self!r} is not the session this code entered last")
        _, session, frame = entered[-1]
        _ENTERED.set(entered[:-1])
        SESSION.set(session)
        FRAME.set(frame)

    @contextmanager
    def bound(self) -> Iterator[Self]:
        """``with session.bound():`` — the same as ``with session:``."""
        with self:
            yield self

    def run(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn`` (sync or async) with this session bound; return its result. An async
        one runs to completion here — on a worker thread when this thread already runs an
        event loop (a notebook), so it works the same everywhere."""
        with self:
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


async def _await(value: Any) -> Any:
    return await value
