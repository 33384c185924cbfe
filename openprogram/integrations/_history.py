"""The session's history tools as plain functions, for a framework to wrap as its own tools.

Each keeps the name, signature and docstring of the ``HistoryTools`` method (frameworks
build the tool schema from them) and returns a bad id or range as ``Error: …`` text the
model reads, never as an exception that would end the framework's run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from openprogram._runtime._history import HISTORY_TOOLS
from openprogram._runtime._host import SessionHost

__all__ = ["history_functions"]


def history_functions(session: SessionHost) -> list[Callable[..., str]]:
    """``read_output``, ``read_history``, ``expand_layer``, ``expand_function``,
    ``search_history`` and ``inspect_node``, bound to ``session``."""
    return [_guarded(getattr(session.history, name)) for name in HISTORY_TOOLS]


def _guarded(method: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(method)
    def tool(*args: Any, **kwargs: Any) -> str:
        try:
            return str(method(*args, **kwargs))
        except Exception as error:  # the model reads the error; the framework's run goes on
            return f"Error: {error}"

    return tool
