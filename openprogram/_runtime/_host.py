"""What the runtime's helpers need of a session (:class:`SessionHost`): the loop, the
current-frame helpers, the overview and the adapters type against it instead of
``Session``, so none of them imports the module that imports them."""

from __future__ import annotations

from typing import Protocol

from graph import Store
from openprogram._runtime._history import HistorySource, HistoryTools
from openprogram._runtime._models import Model

__all__ = ["SessionHost"]


class SessionHost(HistorySource, Protocol):
    """A session as its helpers see it (``Session`` is one): its id and store, its model and
    its history tools, beside what the history tools read (its graph, and the engine that
    renders it under its policy)."""

    @property
    def id(self) -> str: ...

    @property
    def store(self) -> Store: ...

    @property
    def model(self) -> Model | None: ...

    @property
    def history(self) -> HistoryTools: ...
