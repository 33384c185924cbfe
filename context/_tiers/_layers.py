"""Layers at read time: the units a layer covers are shown as its replacement.

Layers are graph facts (``graph.Layer``): the covered nodes stay untouched and a rollback
brings them back exactly. A layer applies on every branch whose walk holds all the nodes it
covers as whole, adjacent units; elsewhere it neither shows nor blocks. A newer layer that
holds older ones hides them (it builds on them); a newer layer inside an older one refines
it: the finest layer shows there, and the older one once, at its first unit no refinement
holds. The projection is cached and extended like the layout, so its cost does not grow
with history.
"""

from __future__ import annotations

import bisect
from typing import Any, NamedTuple

from graph import LayerInfo, layer_handle

from .._view import Unit, View
from ._tier import TierContext


def layer_unit(
    info: LayerInfo, covered: list[Unit], ctx: TierContext, position: int | None = None
) -> Unit:
    """The unit a layer shows in place of ``covered`` (at ``position``: where a coarse
    layer's first unit not refined by a newer layer is)."""
    messages = info.layer.replacement or []
    if ctx.layers is not None and info.id in ctx.layers.overlay:
        ctx.cache.unstored.add(info.id)  # not stored yet: no count of it is in the store
    for index, message in enumerate(messages):
        made = ctx.memo.get((info.id, f"layer:{index}"))
        if made is not None and made.message is not message and made.message != message:
            del ctx.memo[(info.id, f"layer:{index}")]  # decided again under another handle
    items = tuple(
        ctx.item(message, info.id, "layer", part=index) for index, message in enumerate(messages)
    )
    ids = tuple(n for unit in covered for n in unit.node_ids)
    return Unit(
        items,
        "layer",
        covered[0].position if position is None else position,
        pinned=bool(info.layer.meta.get("pinned")),
        node_ids=ids,
        count=sum(unit.count for unit in covered),
        layer=info.id,
    )


def _positions(units: list[Unit]) -> dict[str, int]:
    """Each node id of ``units`` and the index of the unit holding it."""
    return {node: index for index, unit in enumerate(units) for node in unit.node_ids}


def _span(
    units: list[Unit], where: dict[str, int], covers: tuple[str, ...]
) -> tuple[int, int] | None:
    """The index range of the walk's units that exactly hold ``covers``, when they are
    whole and adjacent; its cost is the layer's size, not the walk's (``where`` maps node
    ids to unit indexes)."""
    if not covers:
        return None
    indexes = [where.get(node, -1) for node in covers]
    if -1 in indexes:
        return None
    start, end = min(indexes), max(indexes) + 1
    wanted = set(covers)
    seen: set[str] = set()
    for unit in units[start:end]:
        if not unit.node_ids or not wanted.issuperset(unit.node_ids):
            return None
        seen.update(unit.node_ids)
    return (start, end) if seen == wanted else None


class _Shown(NamedTuple):
    info: LayerInfo
    start: int
    end: int


def _visible(units: list[Unit], layers: list[LayerInfo]) -> tuple[list[_Shown], set[str]]:
    """The layers a walk shows, and the node ids of those it cannot (``layers`` oldest
    first). A layer applies only where the walk holds all its nodes; of two that apply and
    overlap in part (a fork's layer over nodes its parent shares), the older shows and the
    newer neither shows nor blocks. A layer inside a newer one's span is hidden by it (the
    newer builds on it); a newer layer inside an older one refines it, and both show."""
    where = _positions(units)
    applied: list[_Shown] = []
    idle: set[str] = set()
    for info in layers:
        span = _span(units, where, info.covers)
        if span is None:
            idle.update(info.covers)
            continue
        start, end = span
        if any(_crosses(start, end, older) for older in applied):
            idle.update(info.covers)
            continue
        applied.append(_Shown(info, start, end))
    shown = [
        layer
        for index, layer in enumerate(applied)
        if not any(
            newer.start <= layer.start and layer.end <= newer.end for newer in applied[index + 1 :]
        )
    ]
    return shown, idle


def _crosses(start: int, end: int, other: _Shown) -> bool:
    """Whether the span overlaps ``other``'s in part (neither holds the other)."""
    if end <= other.start or other.end <= start:
        return False
    inside = other.start <= start and end <= other.end
    return not inside and not (start <= other.start and other.end <= end)


def _owners(shown: list[_Shown]) -> dict[int, _Shown]:
    """The finest shown layer holding each covered unit index (a refinement wins over
    the coarse layer it lies in)."""
    owner: dict[int, _Shown] = {}
    for layer in sorted(shown, key=lambda s: s.start - s.end):  # widest first
        for index in range(layer.start, layer.end):
            owner[index] = layer
    return owner


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
    the applied layers to ``ctx.layer_key``). Where a newer layer refines part of an older
    one, the finest shows there and the older one shows once, at its first unit left.

    Between renders the shown prefix is reused while the layers and the units it was made
    from are the same, so a render after an append projects only the new units.
    """
    if not layers:
        return view
    units = list(view.units)
    cache: dict[str, Any] = {} if ctx.policy.callers is not None else ctx.scratch
    cache = cache.setdefault("\0layers", {})
    key = (ctx.walks, tuple([(i.id, layer_handle(i)) for i in layers]))
    kept: _Projected | None = cache.get("projected")
    if kept is not None and _reusable(kept, key, units, ctx.first_changed):
        ctx.layer_key = (
            kept.applied if not ctx.layer_key else tuple(sorted({*ctx.layer_key, *kept.applied}))
        )
        return view.replace([*kept.shown, *units[kept.cut :]]) if kept.applied else view
    visible, idle = _visible(units, layers)
    applied = [layer.info.id for layer in visible]
    owner = _owners(visible)
    cut = max((layer.end for layer in visible), default=0)
    shown: list[Unit] = []
    emitted: set[str] = set()
    for index, unit in enumerate(units[:cut]):
        layer = owner.get(index)
        if layer is None:
            shown.append(unit)
        elif layer.info.id not in emitted:
            emitted.add(layer.info.id)
            covered = units[layer.start : layer.end]
            shown.append(layer_unit(layer.info, covered, ctx, unit.position))
    cache["projected"] = _Projected(
        key, cut, units[cut - 1] if cut else None, shown, tuple(sorted(applied)), frozenset(idle)
    )
    ctx.layer_key = tuple(sorted({*ctx.layer_key, *applied}))
    return view.replace([*shown, *units[cut:]]) if applied else view


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
