"""Layers at read time: the units a layer covers are shown as its replacement.

Layers are graph facts (``graph.Layer``): the covered nodes stay untouched and a rollback
brings them back exactly. A layer applies on every branch whose walk holds all the nodes it
covers as whole, adjacent units; a newer layer that builds on older ones hides them. The
projection is cached and extended like the layout, so its cost does not grow with history.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from graph import GraphReader, Layer, LayerInfo, Node, new_id

from ._errors import UnknownLayer
from ._tier import TierContext
from ._view import Item, Unit, View

LAYER_KINDS = ("collapse", "compact", "provider")


class LayerBook:
    """The layers a render may use: the graph's own, plus layers made by a preview render
    (kept in memory only, so looking never writes)."""

    def __init__(self, graph: GraphReader) -> None:
        self.graph = graph
        self.overlay: dict[str, LayerInfo] = {}

    def active(self) -> list[LayerInfo]:
        found = [i for i in self.graph.layers() if i.active and i.id not in self.overlay]
        return [*found, *(i for i in self.overlay.values() if i.active)]

    def get(self, layer_id: str) -> LayerInfo:
        info = self.overlay.get(layer_id)
        if info is not None:
            return info
        try:
            return self.graph.layer(layer_id)
        except KeyError:
            pass
        store = getattr(self.graph, "store", None)
        other = store.session_of(layer_id) if store is not None else None
        if other is not None and other != self.graph.session:
            raise UnknownLayer(
                f"layer {layer_id!r} is not in session {self.graph.session!r}: "
                f"it belongs to session {other!r}"
            )
        raise UnknownLayer(
            f"no layer {layer_id!r} in session {self.graph.session!r}; engine.layers() lists them"
        )

    @property
    def writable(self) -> bool:
        return hasattr(self.graph, "add_layer")

    def add(
        self,
        kind: str,
        covers: list[str],
        replacement: list[dict[str, Any]],
        meta: dict[str, Any],
        *,
        preview: bool,
        layer_id: str | None = None,
    ) -> LayerInfo:
        """Store a layer in the graph (or, for a preview or a read-only graph, in memory)."""
        if not preview and self.writable:
            info: LayerInfo = self.graph.add_layer(  # type: ignore[attr-defined]
                kind, covers, replacement, meta=meta, layer_id=layer_id
            )
            return info
        inside = set(covers)
        built = tuple(i.id for i in self.active() if set(i.covers) <= inside)
        layer = Layer(kind, tuple(covers), replacement, built, meta)
        # as the store would give it back (keys sorted), so a preview shows what a render will
        stored = msgspec.json.encode(layer, order="deterministic")
        layer = msgspec.json.decode(stored, type=Layer)
        info = LayerInfo(
            layer_id or new_id(), self.graph.session, self.graph.last_seq, datetime.now(UTC), layer
        )
        self.overlay[info.id] = info
        return info

    def rollback(self, layer_id: str) -> list[LayerInfo]:
        """Roll back an in-memory layer (and those built on it)."""
        doomed = [layer_id]
        for info in self.overlay.values():
            if info.active and any(b in doomed for b in info.builds_on):
                doomed.append(info.id)
        for doomed_id in doomed:
            old = self.overlay[doomed_id]
            self.overlay[doomed_id] = msgspec.structs.replace(old, rolled_back=old.seq)
        return [self.overlay[d] for d in reversed(doomed)]


def layer_unit(info: LayerInfo, covered: list[Unit], ctx: TierContext) -> Unit:
    """The unit a layer shows in place of ``covered``."""
    messages = info.layer.replacement or []
    items = tuple(
        ctx.item(message, info.id, f"layer:{index}") for index, message in enumerate(messages)
    )
    ids = tuple(n for unit in covered for n in unit.node_ids)
    return Unit(
        items,
        "layer",
        covered[0].position,
        pinned=bool(info.layer.meta.get("pinned")),
        node_ids=ids,
        count=sum(unit.count for unit in covered),
        layer=info.id,
    )


def _find(units: list[Unit], covers: tuple[str, ...]) -> tuple[int, int] | None:
    """The index range of the units that exactly hold ``covers``, when they are adjacent."""
    wanted = set(covers)
    start = end = None
    seen: set[str] = set()
    for index, unit in enumerate(units):
        ids = set(unit.node_ids)
        inside = ids & wanted
        if not inside:
            if start is not None:
                end = index
                break
            continue
        if inside != ids or (start is not None and end is not None):
            return None
        if start is None:
            start = index
        seen |= ids
    if start is None:
        return None
    end = len(units) if end is None else end
    return (start, end) if seen == wanted else None


def project(view: View, ctx: TierContext, layers: list[LayerInfo]) -> View:
    """Show every applicable layer's replacement instead of the units it covers (and add
    the applied layers to ``ctx.layer_key``)."""
    if not layers:
        return view
    units = list(view.units)
    applied: list[str] = []
    covered: set[str] = set()
    for info in sorted(layers, key=lambda i: i.seq, reverse=True):
        if covered.issuperset(info.covers):
            continue
        span = _find(units, info.covers)
        if span is None:
            continue
        start, end = span
        units[start:end] = [layer_unit(info, units[start:end], ctx)]
        covered.update(info.covers)
        applied.append(info.id)
    ctx.layer_key = tuple(sorted({*ctx.layer_key, *applied}))
    return view.replace(units) if applied else view


def covered_nodes(info: LayerInfo, graph: GraphReader) -> list[Node]:
    """The original nodes under a layer, in walk order."""
    return [graph.get(node_id) for node_id in info.covers if node_id in graph]


def item_text(item: Item) -> str:
    content = item.message.get("content")
    return content if isinstance(content, str) else str(content or "")
