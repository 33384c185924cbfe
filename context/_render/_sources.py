"""Each prompt message's ``MessageSource``, taken from the view that made it.

The view's items know their node and variant and its units their layer; the integrity
repairs that run last (added results, renamed call ids, merged roles) are followed step by
step, so every message the caller gets has the source of what it shows.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._store._source import MessageSource
from .._tiers._request import latest_request
from .._tiers._tier import TierContext
from .._view import Item, Unit, Variant, View

_BY_VARIANT: dict[Variant, str] = {
    "offloaded": "offload",
    "reduced": "budget_reduction",
    "cleared": "microcompact",
    "edit-cleared": "microcompact",
    "edit-placeholder": "microcompact",
    "superseded": "rereads",
    "cut": "emergency",
    "stub": "emergency",
    "note": "snip",
    "working": "working_set",
}
"""The tier that shows a node this way (a layer's tier is its kind)."""


def added(render: str) -> MessageSource:
    """The source of a turn no item backs: a placeholder result or a user turn the repairs
    added."""
    return MessageSource(tier="integrity", render=render)


def view_sources(view: View, ctx: TierContext, render: str) -> list[MessageSource]:
    """The source of each of ``view.messages``, in order."""
    request = latest_request(ctx)
    current = None if request is None else request.node_id
    task = _last_task(view) if current is None else None
    found = []
    for unit in view.units:
        for item in unit.items:
            found.append(_source(item, unit, ctx, render, current, task is unit))
    return found


def _last_task(view: View) -> Unit | None:
    """The newest task unit (the current request when no later user message is)."""
    return next((u for u in reversed(view.units) if u.kind == "task"), None)


def _source(
    item: Item, unit: Unit, ctx: TierContext, render: str, current: str | None, task: bool
) -> MessageSource:
    """(A layer's messages name their layer, whose covers are the nodes; a note or stub
    for dropped units names none: listing them in every receipt would grow with history.)"""
    user = item.message.get("role") == "user"
    is_current = user and (task or (current is not None and item.node_id == current))
    tier: str | None = _BY_VARIANT.get(item.variant)
    if unit.layer is not None and item.variant == "layer":
        tier = _layer_kind(ctx, unit.layer)
    elif is_current and item.variant == "cut" and unit.kind == "task":
        tier = "request"
    node = item.node_id
    nodes = (node,) if node is not None and unit.kind not in ("note", "stub", "layer") else ()
    return MessageSource(
        nodes=nodes,
        variant=item.variant,
        unit=unit.kind,
        layer=unit.layer,
        tier=tier,
        current=is_current,
        render=render,
    )


def _layer_kind(ctx: TierContext, layer: str) -> str:
    book = ctx.layers
    if book is None:
        return "layer"
    try:
        return book.get(layer).kind
    except Exception:  # fail-open: a layer another process removed still shows as one
        return "layer"


def merged(sources: Sequence[MessageSource], group: Sequence[int], render: str) -> MessageSource:
    """The source of a message the role rules merged from ``group`` (indexes into
    ``sources``); a turn they inserted (an empty group) was :func:`added`."""
    if not group:
        return added(render)
    if len(group) == 1:
        return sources[group[0]]
    parts = [sources[i] for i in group]
    nodes = tuple(dict.fromkeys(n for part in parts for n in part.nodes))
    first = parts[0]
    return MessageSource(
        nodes=nodes,
        variant=first.variant,
        unit=first.unit,
        layer=first.layer or next((part.layer for part in parts if part.layer), None),
        tier=first.tier,
        current=any(part.current for part in parts),
        render=first.render,
        merged=sum(part.merged for part in parts),
    )
