"""One lock per engine around everything that reads the graph and writes decisions."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Concatenate, ParamSpec, Protocol, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class Locked(Protocol):
    lock: threading.RLock


S = TypeVar("S", bound=Locked)


def locked(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Run ``method`` holding ``self.lock`` (the graph's lock, so appends wait)."""

    def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.lock:
            return method(self, *args, **kwargs)

    functools.update_wrapper(run, method)
    return run
