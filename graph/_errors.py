"""Errors raised by the ``graph`` package.

Every error names what was wrong and where (field, node id, session), so a caller can
fix the input; a rejected write never changes what is stored.

::

    GraphError
    ├── InvalidMessage        a message given to ``append`` is malformed (names the field)
    ├── InvalidText           an id, name or pattern no database can store (a lone surrogate)
    ├── NodeNotFound          an id that is not in this session
    ├── ToolCallError
    │   ├── UnknownToolCall   a tool result whose call id matches no pending tool node
    │   └── DuplicateToolResult  a tool result given twice
    ├── FunctionFinished      appending inside a function that already finished
    ├── CrossSessionError     forking from (or linking to) a node of another session
    ├── CycleError            an edge that would close a cycle
    ├── LayerError            a layer that cannot be made or rolled back
    │   ├── LayerNotFound     a layer id that is not in this session
    │   ├── LayerConflict     a new layer that overlaps an active one in part on one branch
    │   └── LayerRolledBack   rolling back a layer that was already rolled back
    └── StoreError            the database refused, or its schema is unusable
        ├── MigrationError    a schema migration failed or is unknown
        └── NoDatabase        a reader opened a SQLite file that does not exist
"""

from __future__ import annotations


class GraphError(Exception):
    """Base class of every error the graph package raises."""


class InvalidMessage(GraphError, ValueError):
    """A message given to ``append`` is malformed; ``field`` names the offending path."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"invalid message: {field}: {problem}")


class InvalidText(GraphError, ValueError):
    """An id, name or pattern holding a lone surrogate (half of a UTF-16 pair, or a byte
    that was not UTF-8 read with ``surrogateescape``): no database stores it, so nothing
    can be found or written under it; ``what`` names the argument."""

    def __init__(self, what: str, value: str) -> None:
        self.what = what
        self.value = value
        at = next((i for i, c in enumerate(value) if "\ud800" <= c <= "\udfff"), 0)
        shown = repr(value) if len(value) <= 60 else f"{value[:40]!r}…"
        super().__init__(
            f"{what} {shown} is not valid text: it holds a lone surrogate "
            f"(U+{ord(value[at]) if value else 0:04X} at {at}), which no database stores"
        )


class NodeNotFound(GraphError, KeyError):
    """An id that does not name a node of this session."""

    def __init__(self, node_id: str, session: str) -> None:
        self.node_id = node_id
        self.session = session
        super().__init__(f"no node {node_id!r} in session {session!r}")

    def __str__(self) -> str:
        return str(self.args[0])


class ToolCallError(GraphError):
    """A tool result that cannot be matched to exactly one pending call."""


class UnknownToolCall(ToolCallError):
    """A tool result whose ``tool_call_id`` matches no pending tool node."""


class DuplicateToolResult(ToolCallError):
    """A tool result for a call that already has one."""


class FunctionFinished(GraphError):
    """An append that would land inside a function node that has already finished."""


class CrossSessionError(GraphError):
    """An operation that mixes nodes of two sessions."""


class CycleError(GraphError):
    """An edge that would make the conversation graph cyclic."""


class LayerError(GraphError):
    """A layer that cannot be made (overlaps another, covers unknown nodes) or rolled back."""


class LayerNotFound(LayerError, KeyError):
    """A layer id that does not name a layer of this session."""

    def __init__(self, layer_id: str, session: str, other: str | None = None) -> None:
        self.layer_id = layer_id
        self.session = session
        where = f"; it belongs to session {other!r}" if other else ""
        super().__init__(f"no layer {layer_id!r} in session {session!r}{where}")

    def __str__(self) -> str:
        return str(self.args[0])


class LayerConflict(LayerError):
    """A new layer that overlaps an active layer's nodes only in part, where one walk could
    show both (checked under the session's lock, so two processes cannot both store one)."""


class LayerHandleTaken(LayerError):
    """A new layer whose handle (``L<k>`` in its meta) a layer of its session already holds:
    two writers picked it at once. Checked under the session's lock, in the transaction that
    writes the layer, so one handle never names two layers; the later writer picks again."""


class LayerRolledBack(LayerError):
    """A layer that was already rolled back (by this process or another) is rolled back."""

    def __init__(self, layer_id: str, seq: int | None) -> None:
        self.layer_id = layer_id
        super().__init__(f"layer {layer_id} was already rolled back (seq {seq})")


class StoreError(GraphError):
    """The database refused an operation, or holds a schema we cannot use."""


class MigrationError(StoreError):
    """A schema migration failed, or the database has one this code does not know."""


class NoDatabase(StoreError):
    """Opening without ``create`` a SQLite file that does not exist (``path`` names it):
    a reader never makes one, and a caller may take it as "nothing stored yet"."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"no database at {path}")
