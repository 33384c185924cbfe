"""Tier 2, snip: drop the oldest whole units down to a low-water mark.

Never dropped: the system prompt, the first task message, anything inside a running
function's subtree, and the newest unit. Dropping goes to ``snip_low_water`` of the budget
(hysteresis), so the following turns append under a stable prefix. One note says how much
was removed and how to read it back (``read_history``).

The mark is sticky: every later render drops the same units, and the dropped prefix is
built once and reused while nothing before the mark changes, so a long session's render
costs what its kept part costs. A rollback pulls the mark back to before the first round it
restored: those rounds show again, and are dropped again (oldest first) only if the budget
needs it at that render (a prompt a compaction left within the budget is not cut further
into them to reach the low-water mark).
"""

from __future__ import annotations

import bisect
import time

from .._view import Unit, View
from ._tier import Tier, TierContext, TierState, restored_since


class SnipState(TierState):
    """Units before ``boundary`` (a walk position) are dropped; ``anchor`` is the first
    node of the unit just before it, to notice that the walk is now another branch."""

    boundary: int = 0
    anchor: str | None = None
    rollbacks: int = -1
    """Rolled-back layers seen (-1: not counted yet); a newer rollback pulls the mark back."""


def exempt(unit: Unit, last: Unit) -> bool:
    return unit.pinned or unit.running or unit is last or unit.kind == "note"


def note_unit(ctx: TierContext, dropped: list[Unit]) -> Unit:
    """One note standing for ``dropped`` (earlier notes included, merged)."""
    ids = [node for unit in dropped for node in unit.node_ids]
    count = sum(unit.count for unit in dropped)
    first, last = (ctx.handle(ids[0]), ctx.handle(ids[-1])) if ids else ("?", "?")
    item = ctx.item({"role": "user", "content": note_text(count, first, last)}, None, "note")
    position = dropped[0].position if dropped else 0
    return Unit((item,), "note", position, pinned=True, node_ids=tuple(ids), count=count)


def note_text(count: int, first: str, last: str) -> str:
    """The words of a note for dropped rounds (no reader parses them: its source says
    what it is)."""
    return (
        f"[{count} earlier round(s) were removed to fit the context window "
        f'(nodes {first} … {last}); read_history("{first}", "{last}") returns them.]'
    )


def insert_note(kept: list[Unit], note: Unit) -> list[Unit]:
    """Put ``note`` where the first unit it stands for was (units stay in walk order)."""
    at = next((i for i, u in enumerate(kept) if u.position > note.position), len(kept))
    return [*kept[:at], note, *kept[at:]]


def drop(view: View, ctx: TierContext, boundary: int) -> tuple[View, list[Unit]]:
    """Drop every non-exempt unit before ``boundary``; one note stands for all dropped."""
    if not view.units:
        return view, []
    last = view.units[-1]
    dropped = [u for u in view.units if u.position < boundary and not exempt(u, last)]
    if not dropped:
        return view, []
    notes = [u for u in view.units if u.kind == "note"]
    gone = {id(u) for u in (*dropped, *notes)}
    kept = [u for u in view.units if id(u) not in gone]
    merged = sorted([*notes, *dropped], key=lambda u: u.position)
    return view.replace(insert_note(kept, note_unit(ctx, merged))), dropped


def snipped_prefix(before: list[Unit], ctx: TierContext) -> tuple[list[Unit], int]:
    """The units before the low-water mark as a render shows them: the exempt ones and one
    note for the rest; also how many were dropped. ``before`` never holds the newest unit."""
    kept = [u for u in before if u.pinned or u.running]
    dropped = [u for u in before if not (u.pinned or u.running)]
    if not dropped:
        return kept, 0
    return insert_note(kept, note_unit(ctx, dropped)), len(dropped)


def _anchor_id(units: list[Unit], boundary: int) -> str | None:
    index = boundary - 1
    if 0 <= index < len(units) and units[index].position == index:
        return units[index].node_ids[0] if units[index].node_ids else None
    for unit in units:
        if unit.position == index and unit.node_ids:
            return unit.node_ids[0]
    return None


def restore(state: SnipState, ctx: TierContext) -> None:
    """Pull the mark back to the first unit a rollback made since the last render restored
    (what a layer covered is no longer dropped for what the layer's summary was)."""
    state.rollbacks, restored = restored_since(ctx, state.rollbacks)
    if not restored or state.boundary <= 0:
        return
    for unit in ctx.units:
        if unit.position >= state.boundary:
            break
        if not restored.isdisjoint(unit.node_ids):
            state.boundary = unit.position
            state.anchor = _anchor_id(ctx.units, unit.position) if unit.position else None
            return


def reapply(view: View, ctx: TierContext) -> View:
    """Apply the sticky mark; its prefix is reused while nothing before it changed."""
    state = ctx.state(SnipState)
    restore(state, ctx)
    moved = state.anchor is not None and _anchor_id(ctx.units, state.boundary) != state.anchor
    if state.boundary and moved:
        state.boundary, state.anchor = 0, None  # another branch: start over
    boundary = state.boundary
    if boundary <= 0 or not view.units:
        return view
    units = list(view.units)
    boundary = min(boundary, units[-1].position)
    split = bisect.bisect_left([u.position for u in units], boundary)
    cache = ctx.cache_of()
    key = (boundary, ctx.layer_key, ctx.walks)
    cached = cache.get("prefix")
    stale = ctx.first_changed < boundary or ctx.policy.callers is not None
    if cached is None or cached[0] != key or stale:
        prefix, count = snipped_prefix(units[:split], ctx)
        cached = cache["prefix"] = (key, prefix, count)
    after = view.replace([*cached[1], *units[split:]])
    if cached[2]:
        ctx.act("snip", f"kept {cached[2]} earlier round(s) out", view, after)
    return after


def _restored(ctx: TierContext) -> frozenset[str]:
    """The nodes rolled-back layers covered: a prompt within its budget keeps them (the
    mark stops before the first), as the rounds a person asked to see again."""
    return frozenset(n for info in ctx.graph.layers(active=False) for n in info.covers)


def snip(view: View, ctx: TierContext) -> View:
    """Move the low-water mark forward until the prompt is under it; within the budget,
    never past a round a rollback restored (only the budget drops those again)."""
    started = time.perf_counter()
    state = ctx.state(SnipState)
    target = min(ctx.target, int(ctx.budget * ctx.policy.snip_low_water))
    last = view.units[-1] if view.units else None
    candidates = [u for u in view.units if last is not None and not exempt(u, last)]
    if not candidates:
        return view
    base = view.tokens
    if not any(u.kind == "note" for u in view.units):
        base += note_unit(ctx, candidates).tokens  # the note snip adds counts too
    boundary = state.boundary
    removed = 0
    kept = _restored(ctx) if base <= ctx.budget else frozenset()
    for unit in candidates:
        if base - removed <= target or not kept.isdisjoint(unit.node_ids):
            break
        removed += unit.tokens
        boundary = max(boundary, unit.position + unit.count)
    if boundary <= state.boundary:
        return view
    state.boundary = boundary
    state.anchor = _anchor_id(ctx.units, boundary)
    after, dropped = drop(view, ctx, boundary)
    ctx.act(
        "snip",
        f"dropped {len(dropped)} round(s)",
        view,
        after,
        tuple(n for u in dropped for n in u.node_ids),
    )
    ctx.record(
        "snip",
        view,
        after,
        started=started,
        preserved=len(after.units),
        details={"dropped_units": len(dropped), "low_water": target},
    )
    return after


TIER = Tier("snip", apply=reapply, compact=snip, state=SnipState, early=True)
