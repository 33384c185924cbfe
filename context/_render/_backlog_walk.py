"""A first render's backlog, found on the full walk: for a history the chain cannot plan.

When the span holds what :func:`~context._render._backlog_chain.chain_backlog` does not plan on the
bare chain (a finished function, say), the layout walks in full and the backlog is found on
its raw units: the newest units that fit are built and counted, the run of whole rounds and
calls before them becomes the layer (see :mod:`context._render._backlog`), and placeholders stand in
for its units, as under a restored checkpoint. Nothing under the layer is tokenized.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from graph import GraphState, Step

from .._tiers._compact import kept_by_messages
from .._tiers._tier import TierContext
from .._view import TURN_KINDS, RawUnit, Unit
from ._backlog import MIN_UNITS, Span, backlog_layer, estimate, unit_ids
from ._checkpoint import Checkpoint, placeholders, sealed, unit_runs
from ._layout import Layout

_INSPECT = 8

Build = Callable[[RawUnit, int], Unit]
Prefetch = Callable[[Iterable[RawUnit]], None]


def compact_backlog(
    layout: Layout, ctx: TierContext, build: Build, prefetch: Prefetch, state: GraphState
) -> bool:
    """After a full walk (a history :func:`~context._render._backlog_chain.chain_backlog` could not
    plan from the chain: functions in it, say): make the backlog's layer and stand
    placeholders in for the units it covers; False (nothing changed) when the walk is short,
    fits, or the span cannot be hidden. ``prefetch`` reads the stored counts of the units
    about to be built in one go."""
    started = time.perf_counter()
    policy = ctx.policy
    raw = layout.raw
    if policy.backlog_budgets is None or len(raw) < MIN_UNITS or ctx.layers is None:
        return False
    estimates = [estimate(unit) for unit in raw]
    sizes = [whole for whole, _ in estimates]
    if sum(sizes) <= policy.backlog_budgets * ctx.budget:
        return False
    end = _tail(layout, ctx, build, prefetch, sizes)
    first = end
    while first > 0 and _hideable(layout, raw[first - 1]):
        first -= 1
    if end - first < MIN_UNITS // 2:
        return False
    units = raw[first:end]
    ids = [unit_ids(unit) for unit in units]
    covers = tuple(n for found in ids for n in found)
    if not _bounded(layout, state, first, end, covers):
        return False
    ctx.units = [build(raw[i], i) for i in range(first) if raw[i].pinned]  # task, system
    span = Span(
        sizes[first:end],
        [short for _, short in estimates[first:end]],
        units.__getitem__,
        covers,
        (
            entry
            for unit in reversed(units)
            if unit.kind == "round"
            for entry in reversed(unit.entries)
        ),
        _inspectable(units, ctx),
    )
    info = backlog_layer(ctx, span, started)
    if info is None:
        return False
    saved = _checkpoint(layout, state, info.id, first, end, ids)
    hidden = None if saved is None else placeholders(saved, covers)
    if saved is None or hidden is None:  # pragma: no cover - the sizes are the units'
        raise AssertionError("backlog placeholders do not match the layer's nodes")
    layout.hide(saved, hidden, state)
    return True


def _tail(
    layout: Layout, ctx: TierContext, build: Build, prefetch: Prefetch, sizes: list[int]
) -> int:
    """Where the kept newest units start: what auto-compact would keep, counted exactly
    (the only units this render tokenizes besides the pinned ones)."""
    policy, raw = ctx.policy, layout.raw
    count = len(raw)
    room = int(ctx.target * policy.compact_keep_share)
    likely, start = 0, count
    while start > 0 and likely <= 2 * room:
        start -= 1
        likely += sizes[start]
    prefetch(raw[max(0, start - policy.compact_keep_rounds) :])
    if policy.compact_keep_messages is not None:
        sizes_newest = (len(unit.entries) for unit in reversed(raw))
        return count - kept_by_messages(sizes_newest, policy.compact_keep_messages)
    keep = min(count, max(1, policy.compact_keep_rounds))
    used = sum(_built(layout, build, i).tokens for i in range(count - keep, count))
    for index in range(count - keep - 1, -1, -1):
        if raw[index].pinned:
            break
        tokens = _built(layout, build, index).tokens
        if used + tokens > room:
            break
        used += tokens
        keep += 1
    return count - keep


def _built(layout: Layout, build: Build, index: int) -> Unit:
    unit = layout.built[index]
    if unit is None:
        unit = layout.built[index] = build(layout.raw[index], index)
    return unit


def _hideable(layout: Layout, unit: RawUnit) -> bool:
    """A unit a checkpoint can stand a placeholder in for: a whole, finished round or call
    at the top level, nothing in it still pending."""
    if unit.kind not in TURN_KINDS or unit.pinned or unit.running:
        return False
    steps: list[Step] = layout.steps[unit.start : unit.end]
    if any(step.depth or step.running or step.view == "enter" for step in steps):
        return False
    return not layout.watch or not any(node_id in layout.watch for node_id in unit_ids(unit))


def _bounded(
    layout: Layout, state: GraphState, first: int, end: int, covers: tuple[str, ...]
) -> bool:
    """Whether the span's edges are where a checkpoint can cut the walk."""
    raw, steps = layout.raw, layout.steps
    if first < 1 or end >= len(raw):
        return False
    begin, stop = raw[first].start, raw[end - 1].end
    if raw[first - 1].end != begin or raw[end].start != stop:
        return False
    for step in (steps[begin], steps[stop]):
        if step.depth or step.view not in ("message", "call"):
            return False
    inside = set(covers)
    tools = state.tools
    return not any(t not in inside for n in inside for t in tools.get(n, ()))


def _checkpoint(
    layout: Layout,
    state: GraphState,
    layer: str,
    first: int,
    end: int,
    ids: list[tuple[str, ...]],
) -> Checkpoint | None:
    raw, steps = layout.raw, layout.steps
    begin, stop = raw[first].start, raw[end - 1].end
    spanned = zip(raw[first:end], ids, strict=True)
    sizes = unit_runs((unit.kind, len(found)) for unit, found in spanned)
    prev = state.prev
    around = (prev[steps[begin].node.id], prev[steps[stop].node.id], steps[stop].node.id)
    return sealed(state, layer, (first, end), (begin, stop), around, sizes)


def _inspectable(span: Iterable[RawUnit], ctx: TierContext) -> list[str]:
    calls = [unit for unit in span if unit.kind == "call" and unit.entries]
    lines = []
    for unit in calls[-_INSPECT:]:
        message = unit.entries[0][0]
        name = message["tool_calls"][0]["function"]["name"]
        lines.append(f'- function {name}: expand_function("{ctx.handle(unit_ids(unit)[0])}")')
    return lines
