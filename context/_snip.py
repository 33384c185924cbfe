"""Tier 2, snip: drop the oldest whole units down to a low-water mark.

Never dropped: the system prompt, the first task message, anything inside a running
function's subtree, and the newest unit. Dropping goes to ``snip_low_water`` of the budget
(hysteresis), so the following turns append under a stable prefix. One note says how much
was removed and how to read it back.
"""

from __future__ import annotations

import time

from ._tier import TierContext
from ._view import Unit, View


def exempt(unit: Unit, last: Unit) -> bool:
    return unit.pinned or unit.running or unit is last or unit.kind == "note"


def note_unit(ctx: TierContext, dropped: list[Unit]) -> Unit:
    """One note standing for ``dropped`` (earlier notes included, merged)."""
    ids = [node for unit in dropped for node in unit.node_ids]
    count = sum(unit.count for unit in dropped)
    first, last = (ids[0], ids[-1]) if ids else ("?", "?")
    text = (
        f"[{count} earlier round(s) were removed to fit the context window "
        f'(nodes {first} … {last}); read_history("{first}", "{last}") returns them.]'
    )
    item = ctx.item({"role": "user", "content": text}, None, "note")
    position = dropped[0].position if dropped else 0
    return Unit((item,), "note", position, pinned=True, node_ids=tuple(ids), count=count)


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


def snip(view: View, ctx: TierContext) -> View:
    """Move the low-water mark forward until the prompt is under it."""
    started = time.perf_counter()
    target = int(ctx.budget * ctx.policy.snip_low_water)
    last = view.units[-1] if view.units else None
    candidates = [u for u in view.units if last is not None and not exempt(u, last)]
    if not candidates:
        return view
    base = view.tokens
    if not any(u.kind == "note" for u in view.units):
        base += note_unit(ctx, candidates).tokens  # the note snip adds counts too
    boundary = ctx.decisions.snip_boundary
    removed = 0
    for unit in candidates:
        if base - removed <= target:
            break
        removed += unit.tokens
        boundary = max(boundary, unit.position + 1)
    if boundary <= ctx.decisions.snip_boundary:
        return view
    ctx.decisions.snip_boundary = boundary
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
