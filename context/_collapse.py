"""Tier 3, collapse: segments of 5–10 old rounds, each replaced by its own short summary.

Unlike snip, collapse keeps what it removes: each segment becomes a layer (a graph fact)
whose replacement is a summary with the five anchors and the identifiers the rounds
touched, and ``expand_layer`` returns the originals. A layer can be rolled back, and the
prompt is then exactly what it was before; a rolled-back segment is not collapsed again
by the budget (other tiers make room), only by hand.

Segments are taken oldest first from the runs of whole rounds and finished functions
between the pinned units and the newest ``collapse_keep_recent`` units, never inside a
running function, and collapsing stops at the cascade's low-water mark (``ctx.target``),
so the next turns append under a stable prefix. Why collapse comes before snip in the default
cascade: the prefix it breaks is the same (the first changed round), but it keeps the
identifiers snip would drop, and a later snip drops the oldest summaries first.
"""

from __future__ import annotations

import time

import msgspec

from ._summarizing import (
    make_layer,
    new_layer_id,
    request_for,
    reusable,
    segment_key,
    span,
    summarize,
)
from ._summary import SummaryResult
from ._tier import Tier, TierContext, TierState
from ._view import Unit, View


class CollapseState(TierState):
    """Segments whose summary failed or was no shorter (not tried again by the budget)."""

    failed: set[str] = msgspec.field(default_factory=set)


def collapsible(unit: Unit) -> bool:
    return unit.kind in ("round", "call") and not unit.pinned and not unit.running


def segments(
    view: View, ctx: TierContext, declined: frozenset[str] = frozenset()
) -> list[list[Unit]]:
    """Candidate segments, oldest first: runs of collapsible units cut into 5–10 rounds;
    a unit holding a ``declined`` node breaks a run."""
    policy = ctx.policy
    units = list(view.units)
    limit = max(0, len(units) - policy.collapse_keep_recent)
    found: list[list[Unit]] = []
    run: list[Unit] = []
    for unit in [*units[:limit], None]:
        if unit is not None and collapsible(unit) and declined.isdisjoint(unit.node_ids):
            run.append(unit)
            continue
        while len(run) >= policy.collapse_min_rounds:
            take = run[: policy.collapse_max_rounds]
            rest = run[len(take) :]
            if 0 < len(rest) < policy.collapse_min_rounds:
                take = run[: max(policy.collapse_min_rounds, len(run) - policy.collapse_min_rounds)]
                rest = run[len(take) :]
            found.append(take)
            run = rest
        run = []
    return found


def banner(layer_id: str, covered: list[Unit]) -> str:
    count = sum(unit.count for unit in covered)
    return (
        f"[Collapsed: {count} earlier round(s) ({span(covered)}) are summarized here; "
        f'expand_layer("{layer_id}") returns the original messages]'
    )


def collapse_segment(
    view: View, ctx: TierContext, covered: list[Unit], *, reason: str, force: bool = False
) -> tuple[View, str | None]:
    """Replace ``covered`` (adjacent units of ``view``) by a summary layer; returns the new
    view and, when it could not be done, why (the view is then unchanged). ``force`` makes
    the layer even when the summary is not shorter (a person asked for it)."""
    started = time.perf_counter()
    policy = ctx.policy
    covers = tuple(n for unit in covered for n in unit.node_ids)
    key = segment_key(covers)
    result: SummaryResult | None = reusable(ctx, "collapse", covers, "")
    ms = 0.0
    if result is None:
        request = request_for(ctx, "collapse", covered, max_tokens=policy.collapse_summary_tokens)
        result, error, ms = summarize(ctx, request)
        if result is None:
            ctx.state(CollapseState).failed.add(key)
            ctx.act("collapse", f"could not summarize a segment: {error}", view, view, error=error)
            ctx.record(
                "collapse", view, view, started=started, error=error, details={"segment": key}
            )
            return view, error
    layer_id = new_layer_id()
    text = f"{banner(layer_id, covered)}\n{result.text(identifiers=policy.identifier_tokens > 0)}"
    message = {"role": "user", "content": text}
    if not force and ctx.counter.count_message(message) >= sum(u.tokens for u in covered):
        ctx.state(CollapseState).failed.add(key)  # the same rounds give the same summary
        return view, "the summary is no shorter than the rounds"
    meta = {"segment": key, "reason": reason, "rounds": sum(u.count for u in covered)}
    after, info = make_layer(view, ctx, "collapse", covered, [message], result, meta, layer_id)
    ctx.act(
        "collapse", f"collapsed {len(covered)} round(s) into layer {info.id}", view, after, covers
    )
    ctx.record(
        "collapse",
        view,
        after,
        started=started,
        summarized=sum(len(unit.items) for unit in covered),
        preserved=len(after.units),
        summary=text,
        anchors=result.anchors.as_dict(),
        details={
            "layer": info.id,
            "reason": reason,
            "summarizer": {
                "name": result.summarizer,
                "tokens_in": result.tokens_in,
                "tokens_out": result.tokens_out,
                "ms": round(ms, 3),
            },
        },
    )
    return after, None


def collapse(view: View, ctx: TierContext) -> View:
    """Collapse the oldest segments until the prompt is under the low-water mark."""
    target = ctx.target
    state = ctx.state(CollapseState)
    # Rounds a rolled-back collapse covered are left to the other tiers, in any segment.
    declined = frozenset(
        n for i in ctx.graph.layers(active=False) if i.kind == "collapse" for n in i.covers
    )
    for segment in segments(view, ctx, declined):
        if view.tokens <= target:
            break
        key = segment_key(segment)
        if key in state.failed:
            continue
        view, error = collapse_segment(view, ctx, segment, reason="budget")
        if error is not None and error.startswith("summarizer"):
            break  # fail-open: leave the rest to the cheaper tiers
    return view


TIER = Tier("collapse", compact=collapse, state=CollapseState)
