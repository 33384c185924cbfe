"""A render computes and a commit writes: what a render decided, and who writes it.

A render (``ContextEngine._decide``) is a pure step: from the graph as of its seq and the
stored decisions it computes the prompt and the new decisions it rests on (layers, tier
state, records, offload files) and writes nothing. The commit then, in this order:

1. writes the offload files (named by node, so a retry rewrites nothing);
2. in one database transaction, under the session row's lock and after reading what other
   writers stored, checks and stores the layers, then the tier state, token counts,
   records and the render receipt (``ContextEngine.commit_hooks``);
3. and only then lets the prompt go out; the records' JSONL log is copied afterwards.

A conflict (a new layer overlapping in part a layer another process stored on the same
branch, a layer rolled back already, a lease that is gone) undoes the transaction, and
the render decides once more from what it read.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from graph import LayerInfo, Store


class SessionWriter(Protocol):
    """What an engine writes through: a live graph of one session (``ConversationGraph``).

    An engine without one (a view of a past seq, ``read_only=True``) keeps its decisions
    in memory and never writes or migrates anything."""

    store: Store

    @property
    def session(self) -> str: ...

    def refresh(self) -> None:
        """Read what other writers stored since this one last looked."""

    def batch(self) -> AbstractContextManager[None]:
        """One transaction; the graph's index is rolled back with it on failure."""

    def lock(self) -> None:
        """Inside ``batch()``: hold the session's row, then catch up with other writers."""

    def add_layer(
        self,
        kind: str,
        covers: list[str] | tuple[str, ...],
        replacement: Any = None,
        *,
        builds_on: list[str] | tuple[str, ...] = (),
        meta: dict[str, Any] | None = None,
        at: Any = None,
        layer_id: str | None = None,
    ) -> LayerInfo:
        """Store a layer, refusing one that overlaps an active layer in part."""

    def rollback_layer(self, layer_id: str, reason: str | None = None) -> list[LayerInfo]:
        """Roll back a layer (and those built on it), refusing a second rollback."""


class Redo(Exception):
    """The commit was refused (a conflict, a file that could not be written): decide
    again from what the transaction read. ``failed`` names offload files not written."""

    def __init__(self, why: str, failed: tuple[str, ...] = (), problems: tuple[str, ...] = ()):
        super().__init__(why)
        self.failed = failed
        self.problems = problems
