"""``Hooks``: what the embedding application runs around a commit, and what it is shown.

Fences run first inside a commit's transaction (one that raises refuses the commit: a
writer whose lease was taken is fenced off), then the commit hooks with the ``Committed``
render (the runtime writes the render receipt there, atomically with the decisions), and
after the transaction the record callbacks, once per record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from graph import ChatMessage

from .._render._rendered import Rendered
from .._render._request import RenderRequest
from .._store._records import CompactionRecord
from .._store._source import MessageSource


@dataclass(frozen=True)
class Committed:
    """A render as its commit stored it: what was asked for and what it gave."""

    request: RenderRequest
    rendered: Rendered
    sources: Sequence[MessageSource] | None = None
    """Each message's source as a receipt keeps it, with no render named (None: those of
    ``rendered``, whose sources name it)."""

    @property
    def tokens(self) -> int:
        return self.rendered.tokens

    @property
    def messages(self) -> list[ChatMessage]:
        return self.rendered.messages


@dataclass
class Hooks:
    """The callables an engine's commits run (see the module docstring for when)."""

    fences: list[Callable[[], None]] = field(default_factory=list)
    commits: list[Callable[[Committed], None]] = field(default_factory=list)
    records: list[Callable[[CompactionRecord], None]] = field(default_factory=list)

    def fence(self) -> None:
        for fence in self.fences:
            fence()

    def committed(self, committed: Committed) -> None:
        for hook in self.commits:
            hook(committed)

    def notify(self, records: Iterable[CompactionRecord]) -> None:
        for record in records:
            for callback in self.records:
                callback(record)
