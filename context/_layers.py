"""Layers at read time: the units a layer covers are shown as its replacement.

Layers are graph facts (``graph.Layer``): the covered nodes stay untouched and a rollback
brings them back exactly. A layer applies on every branch whose walk holds all the nodes it
covers as whole, adjacent units; a newer layer that builds on older ones hides them. The
projection is cached and extended like the layout, so its cost does not grow with history.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, NamedTuple

import msgspec

from graph import GraphReader, Layer, LayerInfo, Node, new_id

from ._errors import UnknownLayer
from ._tier import TierContext
from ._view import Item, Unit, View

LAYER_KINDS = ("collapse", "compact", "provider")


class LayerBook:
    """The layers a render may use: the graph's own, plus the layers renders decided on
    that are not stored (yet): pending until the engine commits them, or kept in memory
    for good on a read-only graph."""

    def __init__(
        self,
        graph: GraphReader,
        refresh: Callable[[], None] | None = None,
        session_of: Callable[[str], str | None] | None = None,
    ) -> None:
        self.graph = graph
        self.refresh = refresh
        """Reads what other writers stored (a layer made elsewhere is found after it)."""
        self.session_of = session_of
        self.overlay: dict[str, LayerInfo] = {}

    def active(self) -> list[LayerInfo]:
        found = [i for i in self.graph.layers() if i.active and i.id not in self.overlay]
        return [*found, *(i for i in self.overlay.values() if i.active)]

    def get(self, layer_id: str) -> LayerInfo:
        info = self.overlay.get(layer_id)
        if info is not None:
            return info
        for attempt in range(2):
            try:
                return self.graph.layer(layer_id)
            except KeyError:
                if attempt or self.refresh is None:
                    break
                self.refresh()
        other = self.session_of(layer_id) if self.session_of is not None else None
        if other is not None and other != self.graph.session:
            raise UnknownLayer(
                f"layer {layer_id!r} is not in session {self.graph.session!r}: "
                f"it belongs to session {other!r}"
            )
        raise UnknownLayer(
            f"no layer {layer_id!r} in session {self.graph.session!r}; engine.layers() lists them"
        )

    def add(
        self,
        kind: str,
        covers: list[str],
        replacement: list[dict[str, Any]],
        meta: dict[str, Any],
        *,
        layer_id: str | None = None,
    ) -> LayerInfo:
        """A new layer, in memory until the engine commits the render that made it."""
        inside = set(covers)
        built = tuple(i.id for i in self.active() if set(i.covers) <= inside)
        layer = Layer(kind, tuple(covers), replacement, built, meta)
        # as the store gives it back (keys sorted), so the prompt is what a reader will see
        stored = msgspec.json.encode(layer, order="deterministic")
        layer = msgspec.json.decode(stored, type=Layer)
        info = LayerInfo(
            layer_id or new_id(), self.graph.session, self.graph.last_seq, datetime.now(UTC), layer
        )
        self.overlay[info.id] = info
        return info

    def pending(self) -> list[LayerInfo]:
        """The layers decided on and not stored, oldest first."""
        return list(self.overlay.values())

    def settle(self, layer_ids: Iterable[str]) -> None:
        """Forget these in-memory layers: stored now, or dropped with their render."""
        for layer_id in layer_ids:
            self.overlay.pop(layer_id, None)

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


def _positions(units: list[Unit]) -> dict[str, int]:
    """Each node id of ``units`` and the index of the unit holding it."""
    return {node: index for index, unit in enumerate(units) for node in unit.node_ids}


class _Spans:
    """Layers applied so far over the walk's units, by unit index: a span shows as one
    unit, which a later (older) layer may cover whole but never in part."""

    def __init__(self) -> None:
        self.outer: dict[int, tuple[int, int]] = {}
        self.applied: dict[int, tuple[int, LayerInfo]] = {}

    def widen(self, start: int, end: int) -> tuple[int, int]:
        first = self.outer.get(start)
        last = self.outer.get(end - 1)
        return (first[0] if first else start, last[1] if last else end)

    def add(self, start: int, end: int, info: LayerInfo) -> None:
        for index in range(start, end):
            self.applied.pop(index, None)  # a span it covers whole shows inside it now
            self.outer[index] = (start, end)
        self.applied[start] = (end, info)


def _find(
    units: list[Unit], where: dict[str, int], spans: _Spans, covers: tuple[str, ...]
) -> tuple[int, int] | None:
    """The index range of the units (an applied layer's span counting as one unit) that
    exactly hold ``covers``, when they are adjacent; its cost is the layer's size, not the
    walk's (``where`` maps node ids to unit indexes)."""
    if not covers:
        return None
    indexes = [where.get(node, -1) for node in covers]
    if -1 in indexes:
        return None
    start, end = spans.widen(min(indexes), max(indexes) + 1)
    wanted = set(covers)
    seen: set[str] = set()
    for unit in units[start:end]:
        if not unit.node_ids or not wanted.issuperset(unit.node_ids):
            return None
        seen.update(unit.node_ids)
    return (start, end) if seen == wanted else None


class _Projected(NamedTuple):
    """A projection kept for the next render: the units before ``cut`` as shown."""

    key: tuple[object, ...]
    cut: int
    last: Unit | None
    shown: list[Unit]
    applied: tuple[str, ...]
    """The applied layers' ids, sorted (as ``ctx.layer_key`` holds them)."""
    idle: frozenset[str]
    """Node ids of the layers that did not apply (a new unit holding one means redo)."""


def project(view: View, ctx: TierContext, layers: list[LayerInfo]) -> View:
    """Show every applicable layer's replacement instead of the units it covers (and add
    the applied layers to ``ctx.layer_key``).

    Between renders the shown prefix is reused while the layers and the units it was made
    from are the same, so a render after an append projects only the new units.
    """
    if not layers:
        return view
    units = list(view.units)
    cache: dict[str, Any] = {} if ctx.policy.callers is not None else ctx.scratch
    cache = cache.setdefault("\0layers", {})
    key = (ctx.walks, tuple([i.id for i in layers]))
    kept: _Projected | None = cache.get("projected")
    if kept is not None and _reusable(kept, key, units, ctx.first_changed):
        ctx.layer_key = (
            kept.applied if not ctx.layer_key else tuple(sorted({*ctx.layer_key, *kept.applied}))
        )
        return view.replace([*kept.shown, *units[kept.cut :]]) if kept.applied else view
    where = _positions(units)
    applied: list[str] = []
    covered: set[str] = set()
    spans = _Spans()
    idle: set[str] = set()
    for info in sorted(layers, key=lambda i: i.seq, reverse=True):
        if covered.issuperset(info.covers):
            continue
        span = _find(units, where, spans, info.covers)
        if span is None:
            idle.update(info.covers)
            continue
        spans.add(*span, info)
        covered.update(info.covers)
        applied.append(info.id)
    shown: list[Unit] = []
    cut = position = 0
    for start in sorted(spans.applied):
        end, info = spans.applied[start]
        shown.extend(units[position:start])
        shown.append(layer_unit(info, units[start:end], ctx))
        position = cut = end
    shown.extend(units[position:])
    prefix = len(shown) - (len(units) - cut)
    last = units[cut - 1] if cut else None
    cache["projected"] = _Projected(
        key, cut, last, shown[:prefix], tuple(sorted(applied)), frozenset(idle)
    )
    ctx.layer_key = tuple(sorted({*ctx.layer_key, *applied}))
    return view.replace(shown) if applied else view


def show_layer(view: View, ctx: TierContext, info: LayerInfo, covered: list[Unit]) -> View:
    """``view`` with ``covered`` (adjacent units of it, in order) shown as the new layer
    ``info``: what :func:`project` does for one layer, found by position in O(log n), as
    a tier making one layer after another (collapse) needs."""
    units = view.units
    at = bisect.bisect_left(units, covered[0].position, key=_position) if covered else -1
    count = len(covered)
    if at < 0 or any(units[at + i] is not unit for i, unit in enumerate(covered)):
        return project(view, ctx, [info])
    ctx.layer_key = tuple(sorted({*ctx.layer_key, info.id}))
    return view.swap(at, at + count, layer_unit(info, covered, ctx))


def _position(unit: Unit) -> int:
    return unit.position


def _reusable(kept: _Projected, key: tuple[object, ...], units: list[Unit], first: int) -> bool:
    if kept.key != key or first < kept.cut or len(units) < kept.cut:
        return False
    if kept.cut and units[kept.cut - 1] is not kept.last:
        return False
    return not any(node in kept.idle for unit in units[kept.cut :] for node in unit.node_ids)


def covered_nodes(info: LayerInfo, graph: GraphReader) -> list[Node]:
    """The original nodes under a layer, in walk order."""
    return [graph.get(node_id) for node_id in info.covers if node_id in graph]


def item_text(item: Item) -> str:
    content = item.message.get("content")
    return content if isinstance(content, str) else str(content or "")
