"""What the code running now belongs to: its session, its frame, the tool call it serves.

Each is a ``ContextVar``, so every thread and asyncio task has its own: two investigations
gathered concurrently each append to their own function's chain. A new thread starts empty;
run it under ``contextvars.copy_context()`` (as the LLM loop does for tools) to inherit.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from graph import TOP, Frame
from openprogram._errors import NoSession
from openprogram._runtime._host import SessionHost

SESSION: ContextVar[SessionHost | None] = ContextVar("openprogram_session", default=None)
FRAME: ContextVar[Frame] = ContextVar("openprogram_frame", default=TOP)
TOOL_NODE: ContextVar[str | None] = ContextVar("openprogram_tool_node", default=None)
"""The tool node whose call is being executed (a function it starts is ``spawned`` by it)."""
MODEL: ContextVar[Any] = ContextVar("openprogram_model_override", default=None)
"""A model that replaces every other (``openprogram.testing.override``)."""


def current_host() -> SessionHost:
    """The session the running code belongs to; :class:`NoSession` outside one."""
    session = SESSION.get()
    if session is None:
        raise NoSession(
            "no session is active: run agentic code inside `with openprogram.Session(...):` "
            "or `session.run(fn, ...)`"
        )
    return session


def current_frame() -> Frame:
    """The frame appends go to: the running agentic function's, or the top level."""
    return FRAME.get()
