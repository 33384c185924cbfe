"""What the runtime's helpers need of a session (:class:`SessionHost`): the loop, the
current-frame helpers, the overview and the adapters type against it instead of
``Session``, so none of them imports the module that imports them."""

from __future__ import annotations

from typing import Protocol

from context import ContextEngine, Policy
from graph import ConversationGraph, Store
from openprogram._runtime._history import HistoryTools
from openprogram._runtime._models import Model

__all__ = ["SessionHost"]


class SessionHost(Protocol):
    """A session as its helpers see it (``Session`` is one): its id and store, its graph,
    the engine that renders it under its policy, its model and its history tools."""

    @property
    def id(self) -> str: ...

    @property
    def store(self) -> Store: ...

    @property
    def graph(self) -> ConversationGraph: ...

    @property
    def engine(self) -> ContextEngine: ...

    @property
    def policy(self) -> Policy: ...

    @property
    def model(self) -> Model | None: ...

    @property
    def history(self) -> HistoryTools: ...
