"""Node values: the immutable payloads of dialogue, function and tool nodes.

A node's payload never changes once stored. What happens to a node later (a tool's result,
a function finishing) is a separate, sequenced fact — an :class:`Event` — so the graph can
be read as it was at any ``seq``. :class:`Node` joins the two for a reader: identity and
payload plus the node's state as of the reading.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, TypeAlias

import msgspec

Role: TypeAlias = Literal["system", "user", "assistant"]
Expose: TypeAlias = Literal["io", "full", "llm", "hidden"]
Status: TypeAlias = Literal["running", "completed", "error", "interrupted"]
EdgeType: TypeAlias = Literal["next", "caller", "requested", "spawned"]
Content: TypeAlias = str | list[dict[str, Any]] | None

EXPOSE_MODES: tuple[str, ...] = ("io", "full", "llm", "hidden")
EDGE_TYPES: tuple[str, ...] = ("next", "caller", "requested", "spawned")


class Dialogue(msgspec.Struct, frozen=True, tag="dialogue", omit_defaults=True, gc=False):
    """A system, user or assistant message; assistant tool calls are separate tool nodes."""

    role: Role
    content: Content = None
    thinking: str | None = None
    name: str | None = None


class Function(msgspec.Struct, frozen=True, tag="function", omit_defaults=True, gc=False):
    """An agentic function call; its status and output arrive later as a ``finish`` event."""

    name: str
    input: Any = None
    expose: Expose = "io"


class Tool(msgspec.Struct, frozen=True, tag="tool", omit_defaults=True, gc=False):
    """A tool call requested by an assistant node; its result arrives as a ``result`` event."""

    name: str
    arguments: str
    call_id: str


Payload: TypeAlias = Dialogue | Function | Tool


class ToolResult(msgspec.Struct, frozen=True, tag="result", omit_defaults=True, gc=False):
    """The result of a tool call, a later fact about a tool node."""

    content: Content
    is_error: bool = False


class Finish(msgspec.Struct, frozen=True, tag="finish", omit_defaults=True, gc=False):
    """How a function node ended; ``last`` is the newest node of its own chain at exit.
    ``interrupted``: the process running it died (its lease expired), so it never will."""

    status: Literal["completed", "error", "interrupted"]
    output: Any = None
    error: str | None = None
    last: str | None = None


class Fork(msgspec.Struct, frozen=True, tag="fork", gc=False):
    """A head moved back to an earlier node: the next append starts a branch there."""


class Layer(msgspec.Struct, frozen=True, tag="layer", omit_defaults=True, gc=False):
    """A projection over stored nodes: readers that honour it show ``replacement`` where the
    ``covers`` nodes were. The nodes themselves never change; a :class:`Rollback` ends it.

    ``kind`` says who made it (``collapse``, ``compact``, ``provider``…), ``builds_on`` the
    layers it absorbs (rolling one of those back rolls this one back too), ``meta`` what its
    maker wants to keep (a summary's anchors, the records' ids).
    """

    kind: str
    covers: tuple[str, ...]
    replacement: Any = None
    builds_on: tuple[str, ...] = ()
    meta: dict[str, Any] = msgspec.field(default_factory=dict)


class Rollback(msgspec.Struct, frozen=True, tag="rollback", omit_defaults=True, gc=False):
    """A layer stops applying (its event's ``node_id`` names the layer)."""

    reason: str | None = None


EventData: TypeAlias = ToolResult | Finish | Fork | Layer | Rollback


class Edge(msgspec.Struct, frozen=True, gc=False):
    """A typed edge between two nodes of one session (``src`` is always the older node)."""

    src: str
    dst: str
    type: EdgeType


class Event(msgspec.Struct, frozen=True, gc=False):
    """A sequenced fact about an existing node."""

    session: str
    seq: int
    node_id: str
    at: datetime
    data: ToolResult | Finish | Fork | Layer | Rollback

    @property
    def type(self) -> str:
        """The event's tag: result, finish, fork, layer or rollback."""
        tag = type(self.data).__struct_config__.tag
        assert isinstance(tag, str)
        return tag


class Node(msgspec.Struct, frozen=True, gc=False):
    """A node as read: identity, immutable payload, meta, and its state at the reading's seq.

    ``result`` (tool nodes) and ``finish`` (function nodes) are ``None`` until the event that
    sets them; reading the graph as of an earlier seq gives the node without them.
    """

    id: str
    session: str
    seq: int
    at: datetime
    payload: Payload
    meta: dict[str, Any] = msgspec.field(default_factory=dict)
    result: ToolResult | None = None
    finish: Finish | None = None

    @property
    def kind(self) -> Literal["dialogue", "function", "tool"]:
        if isinstance(self.payload, Dialogue):
            return "dialogue"
        if isinstance(self.payload, Function):
            return "function"
        return "tool"

    @property
    def role(self) -> str | None:
        """The dialogue role, or None for function and tool nodes."""
        return self.payload.role if isinstance(self.payload, Dialogue) else None

    @property
    def status(self) -> str:
        """``running``/``completed``/``error`` for functions, ``pending``/``done`` for tools."""
        if isinstance(self.payload, Function):
            return "running" if self.finish is None else self.finish.status
        if isinstance(self.payload, Tool):
            return "pending" if self.result is None else "done"
        return "done"

    @property
    def output(self) -> Any:
        """A finished function's output (None while running)."""
        return None if self.finish is None else self.finish.output

    def _repr_html_(self) -> str:
        from ._html import node_html

        return node_html(self)


class LayerInfo(msgspec.Struct, frozen=True, gc=False):
    """A layer as read: its id (the event's ``node_id``), when it was made, and whether and
    when it was rolled back, as of the reading's seq."""

    id: str
    session: str
    seq: int
    at: datetime
    layer: Layer
    rolled_back: int | None = None
    """Seq of the rollback event (None while the layer applies)."""
    reason: str | None = None

    @property
    def active(self) -> bool:
        return self.rolled_back is None

    @property
    def kind(self) -> str:
        return self.layer.kind

    @property
    def covers(self) -> tuple[str, ...]:
        return self.layer.covers

    @property
    def builds_on(self) -> tuple[str, ...]:
        return self.layer.builds_on

    def _repr_html_(self) -> str:
        from ._html import layer_html

        return layer_html(self)


def node_kind(payload: Payload) -> str:
    """The kind name stored for a payload (its msgspec tag)."""
    if isinstance(payload, Dialogue):
        return "dialogue"
    return "function" if isinstance(payload, Function) else "tool"
