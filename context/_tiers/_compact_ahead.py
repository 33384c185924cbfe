"""The summaries of the compact and summarize_half tiers prepared ahead, and adopted when a
render went without.

With a prefetcher (a slow summarizer), from ``proactive_share`` of the tier's threshold the
span its compaction will cover once the prompt has grown to it (summarize_half: the oldest
half of that) is summarized on the worker (``CompactState.prepared``, each tier its own);
the budget's compaction covers that span, waiting for it if need be (the default: what a
render shows never depends on timing), so the summary is usually done by then. Under
``summary_wait = "never"`` it never waits: the render goes without (``owed``) and the next
render its summary is done by adopts it.
"""

from __future__ import annotations

from collections.abc import Callable

from .._view import Unit, View
from ._collapse import first_node, follows, grown
from ._compact import (
    ADDED_KINDS,
    AHEAD,
    HALF,
    CompactState,
    compact,
    compact_span,
    compaction_request,
    is_compaction,
    oldest,
    span_to_compact,
    summarize_half,
    too_little,
)
from ._summarizing import reusable, segment_key
from ._tier import Tier, TierContext


def _still_shown(units: list[Unit], prepared: list[str]) -> list[Unit]:
    """The first of ``units`` that are the end of the ``prepared`` span: what the cheaper
    tiers (snip) left of it while its summary was prepared."""
    wanted = set(prepared)
    part: list[Unit] = []
    for unit in units:
        if not unit.node_ids or not wanted.issuperset(unit.node_ids):
            break
        part.append(unit)
    return part if part and part[-1].node_ids[-1] == prepared[-1] else []


def ahead(view: View, ctx: TierContext) -> View:
    """Every render: under ``summary_wait = "never"``, adopt the compaction whose summary
    a render went without once it is done; from ``proactive_share`` of the threshold,
    start the summary of the span a compaction would cover now."""
    return _ahead(view, ctx, _ahead_span)


def ahead_half(view: View, ctx: TierContext) -> View:
    """:func:`ahead` for summarize_half (the span of :func:`_half_span`)."""
    return _ahead(view, ctx, _half_span)


def _ahead(
    view: View, ctx: TierContext, span: Callable[[View, TierContext, int], list[Unit]]
) -> View:
    prefetch, state = ctx.prefetch, ctx.state(CompactState)
    if prefetch is None:
        return view
    if state.prepared:
        return _adopt(view, ctx, state) if state.owed else view
    share = ctx.policy.proactive_share
    threshold = ctx.threshold(ctx.tier)
    if share is None or not share * threshold < view.tokens <= threshold:
        return view  # over the threshold, the compaction itself asks
    covered = span(view, ctx, int(threshold - view.tokens))
    if not covered or segment_key(covered) in state.failed:
        return view
    fresh = [u for u in covered if not is_compaction(u, ctx)]
    fresh_tokens = sum(u.tokens for u in fresh)
    if too_little(ctx, fresh_tokens) or not grown(
        ctx, state.declined, first_node(fresh), fresh_tokens
    ):
        return view  # the compaction would not take this span: nothing worth preparing
    covers = tuple(n for unit in covered for n in unit.node_ids)
    if reusable(ctx, "compact", covers, "") is None:
        prefetch.ahead(AHEAD + segment_key(covers), compaction_request(view, ctx, covered, None))
    state.prepared = list(covers)
    return view


def _ahead_span(view: View, ctx: TierContext, growth: int) -> list[Unit]:
    """The span a compaction would cover once the prompt has grown by ``growth`` tokens:
    what it would cover now, and as many of the next units as those rounds will push out
    of the newest ones it keeps (so that the prepared span is, then, the whole span)."""
    covered = span_to_compact(view, ctx)
    if not covered or ctx.policy.compact_keep_messages is not None:
        return covered
    units = list(view.units)
    end = next(i for i, unit in enumerate(units) if unit is covered[-1]) + 1
    room = int(ctx.target * ctx.policy.compact_keep_share) - growth
    kept = sum(unit.tokens for unit in units[end:])
    while kept > room and len(units) - end > max(1, ctx.policy.compact_keep_rounds):
        unit = units[end]
        if not _joins(covered[-1], unit):
            break
        covered.append(unit)
        kept -= unit.tokens
        end += 1
    return covered


def _joins(last: Unit, unit: Unit) -> bool:
    """Whether ``unit``, now among the newest kept, can join a span ending at ``last``."""
    eligible = not (unit.pinned or unit.running or unit.kind in ADDED_KINDS)
    return eligible and follows(last, unit)


def _half_span(view: View, ctx: TierContext, growth: int) -> list[Unit]:
    """summarize_half's span once the prompt has grown by ``growth`` tokens and its span
    takes in enough (``compact_min_fresh_share``): the oldest half of the compaction's span
    then. Under ``compact_keep_messages`` every new unit pushes one of the newest into that
    span, so it counts a unit more for each newest unit's worth of growth."""
    covered = _ahead_span(view, ctx, growth)
    if not covered or ctx.policy.compact_keep_messages is None:
        return oldest(covered, HALF, ctx)
    units = list(view.units)
    end = next(i for i, unit in enumerate(units) if unit is covered[-1]) + 1
    known = list(covered)
    for unit in units[end:]:
        if not _joins(known[-1], unit):
            break
        known.append(unit)
    newest = units[end:]
    size = max(1, sum(u.tokens for u in newest) // len(newest)) if newest else growth or 1
    count = len(covered) + -(-growth // size)
    while (half := max(1, int(count * HALF))) <= len(known):
        part = oldest(known[:half], 1.0, ctx)
        if part and not too_little(ctx, sum(u.tokens for u in part if not is_compaction(u, ctx))):
            return part
        count += 1
    return []


def _adopt(view: View, ctx: TierContext, state: CompactState) -> View:
    """The compaction a render went without, made once its summary is done (dropped when
    its span is no longer the start of what a compaction would cover)."""
    assert ctx.prefetch is not None
    key = AHEAD + segment_key(tuple(state.prepared))
    if not ctx.prefetch.started(key):
        state.prepared, state.owed = [], False  # another process started it: asked again
        return view
    if not ctx.prefetch.ready(key):
        return view
    covered = _still_shown(span_to_compact(view, ctx, manual=True), state.prepared)
    state.prepared, state.owed = [], False
    if not covered:
        ctx.prefetch.take(key)
        return view
    return compact_span(view, ctx, covered, focus=None, reason="budget", key=key)[0]


TIER = Tier("compact", apply=ahead, compact=compact, state=CompactState)
HALF_TIER = Tier("summarize_half", apply=ahead_half, compact=summarize_half, state=CompactState)
