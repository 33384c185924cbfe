"""Tier 3, collapse: segments of 5–10 old rounds, each replaced by its own short summary.

Unlike snip, collapse keeps what it removes: each segment becomes a layer (a graph fact)
whose replacement is a summary with the five anchors and the identifiers the rounds
touched, and ``expand_layer`` returns the originals. A layer can be rolled back, and the
prompt is then exactly what it was before; a rolled-back segment is not collapsed again
by the budget (other tiers make room), only by hand. Rounds another rolled-back layer (a
compaction) restored are collapsed by the budget only after every other segment.

Segments are taken oldest first from the runs of whole rounds and finished functions
between the pinned units and the newest ``collapse_keep_recent`` units, never inside a
running function, and collapsing stops at the cascade's low-water mark (``ctx.target``),
so the next turns append under a stable prefix. Why collapse comes before snip in the default
cascade: the prefix it breaks is the same (the first changed round), but it keeps the
identifiers snip would drop, and a later snip drops the oldest summaries first.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import msgspec

from graph import HANDLE_KEY, ChatMessage

from .._budget._names import as_layer_kind, as_tier
from .._summaries._summary import SummaryResult
from .._view import TURN_KINDS, Unit, View
from ._awaiting import NOT_READY
from ._summarizing import (
    make_layer,
    new_layer_id,
    record_layer,
    request_for,
    reusable,
    segment_key,
    span,
    summarize,
)
from ._tier import Tier, TierContext, TierState


class CollapseState(TierState):
    """Segments whose summary failed or was no shorter (not tried again by the budget), and
    the tokens of segments, by first node, whose summary did not pay (tried again once
    they have grown by ``payoff_retry_tokens``)."""

    failed: set[str] = msgspec.field(default_factory=set)
    declined: dict[str, int] = msgspec.field(default_factory=dict)


def collapsible(unit: Unit) -> bool:
    return unit.kind in TURN_KINDS and not unit.pinned and not unit.running


def segments(
    view: View, ctx: TierContext, declined: frozenset[str] = frozenset()
) -> list[list[Unit]]:
    """Candidate segments, oldest first: runs of collapsible units cut into 5–10 rounds;
    a unit holding a ``declined`` node breaks a run.

    Full segments of ``collapse_max_rounds`` come first and a shorter rest (at least
    ``collapse_min_rounds``) last, so a run's first segments never depend on how long the
    conversation has grown: a segment summarized ahead of need is the segment collapsed
    later, and the short rest is taken only when the full ones were not enough.
    """
    policy = ctx.policy
    units = list(view.units)
    limit = max(0, len(units) - policy.collapse_keep_recent)
    size, least = policy.collapse_max_rounds, policy.collapse_min_rounds
    found: list[list[Unit]] = []
    run: list[Unit] = []
    for unit in [*units[:limit], None]:
        if run and unit is not None and not follows(run[-1], unit):
            found.extend(_cut(run, size, least))  # a gap (snipped units): a layer must
            run = []  # cover units adjacent in the walk, or it never applies again
        if unit is not None and collapsible(unit) and declined.isdisjoint(unit.node_ids):
            run.append(unit)
            continue
        found.extend(_cut(run, size, least))
        run = []
    return found


def _cut(run: list[Unit], size: int, least: int) -> list[list[Unit]]:
    found: list[list[Unit]] = []
    while len(run) >= size:
        found.append(run[:size])
        run = run[size:]
    if len(run) >= least:
        found.append(run)
    return found


def follows(before: Unit, unit: Unit) -> bool:
    """Whether ``unit`` comes right after ``before`` in the walk (nothing between them was
    dropped from the view)."""
    return unit.position == before.position + before.count


def summary_cap(ctx: TierContext, covered: list[Unit]) -> int:
    """A segment's summary may take ``collapse_summary_tokens``, but never more than half
    of what it replaces (a summary as long as its rounds saves nothing)."""
    return min(ctx.policy.collapse_summary_tokens, max(60, sum(u.tokens for u in covered) // 2))


def inspectable(covered: list[Unit], ctx: TierContext, limit: int = 8) -> list[str]:
    """Finished functions among ``covered``, each with the tool call that reads it back."""
    lines = []
    for unit in covered:
        if unit.kind == "call" and unit.node_ids:
            call = unit.items[0].message["tool_calls"][0]["function"]["name"]
            lines.append(f'- function {call}: expand_function("{ctx.handle(unit.node_ids[0])}")')
    return lines[-limit:]


def banner(handle: str, covered: list[Unit], ctx: TierContext) -> str:
    """A collapse layer's first line: what it covers and how to read it back, by handles."""
    count = sum(unit.count for unit in covered)
    return (
        f"[Collapsed: {count} earlier round(s) ({span(covered, ctx)}) are summarized here; "
        f'expand_layer("{handle}") returns the original messages]'
    )


class Refused(NamedTuple):
    """Why a segment was not collapsed (``str()`` is the reason, as records say it);
    ``summarizer``: the summarizer failed or replied with nothing usable, so the budget
    loop stops and leaves the rest to the cheaper tiers."""

    reason: str
    summarizer: bool = False

    def __str__(self) -> str:
        return self.reason


def collapse_segment(
    view: View, ctx: TierContext, covered: list[Unit], *, reason: str, force: bool = False
) -> tuple[View, Refused | None]:
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
        request = request_for(ctx, "collapse", covered, max_tokens=summary_cap(ctx, covered))
        result, error, ms = summarize(ctx, request, key, wait=reason != "budget")
        if result is None:
            if error != NOT_READY:
                ctx.state(CollapseState).failed.add(key)
            ctx.act("collapse", f"could not summarize a segment: {error}", view, view, error=error)
            ctx.record(
                "collapse", view, view, started=started, error=error, details={"segment": key}
            )
            return view, Refused(str(error), summarizer=ctx.summarizer is not None)
    layer_id = new_layer_id(ctx, [n for unit in covered for n in unit.node_ids], "collapse")
    handle = ctx.layers.next_handle() if ctx.layers is not None else layer_id
    summary = result.text(identifiers=policy.identifier_tokens > 0)
    text = f"{banner(handle, covered, ctx)}\n{summary}"
    functions = inspectable(covered, ctx)
    if functions:
        text += "\n## Nodes to inspect\n" + "\n".join(functions)
    message: ChatMessage = {"role": "user", "content": text}
    before = sum(u.tokens for u in covered)
    if not force and not pays(ctx, before, ctx.counter.count_message(message)):
        state = ctx.state(CollapseState)
        state.failed.add(key)  # the same rounds give the same summary
        state.declined[first_node(covered)] = before  # and a few more rounds a similar one
        return view, Refused(f"the summary would save less than {ctx.policy.payoff_share:.0%}")
    meta = {
        "segment": key,
        "reason": reason,
        "rounds": sum(u.count for u in covered),
        HANDLE_KEY: handle,
    }
    after, info = make_layer(view, ctx, "collapse", covered, [message], result, meta, layer_id)
    ctx.act(
        "collapse", f"collapsed {len(covered)} round(s) into layer {info.id}", view, after, covers
    )
    details = {"layer": info.id, "reason": reason}
    record_layer(
        ctx, "collapse", view, after, covered, result, text, started=started, ms=ms, details=details
    )
    return after, None


def first_node(units: list[Unit]) -> str:
    """The node a part starts at: what keeps it the same part as it grows."""
    return next((n for unit in units for n in unit.node_ids), "")


def pays(ctx: TierContext, summarized: int, replacement: int) -> bool:
    """Whether replacing ``summarized`` tokens (met for the first time) by ``replacement``
    saves at least the policy's ``payoff_share`` of them."""
    return summarized - replacement >= ctx.policy.payoff_share * summarized


def grown(ctx: TierContext, declined: dict[str, int], first: str, tokens: int) -> bool:
    """Whether a part whose summary did not pay (at ``declined[first]`` tokens) has grown
    enough to be tried again."""
    was = declined.get(first)
    return was is None or tokens >= was + max(1, ctx.policy.payoff_retry_tokens)


def _candidates(view: View, ctx: TierContext, *, restored: bool = False) -> list[list[Unit]]:
    """The segments the budget would collapse next: rounds a rolled-back collapse covered
    are left to the other tiers (in any segment), rounds another rolled-back layer restored
    are taken only when ``restored`` (the budget needs them), failed segments are not
    retried, and one whose summary did not pay only once it has grown."""
    state = ctx.state(CollapseState)
    declined = frozenset(
        n
        for i in ctx.graph.layers(active=False)
        if as_layer_kind(i.kind) == "collapse" or not restored
        for n in i.covers
    )
    return [
        s
        for s in segments(view, ctx, declined)
        if segment_key(s) not in state.failed
        and grown(ctx, state.declined, first_node(s), sum(u.tokens for u in s))
    ]


def ahead(view: View, ctx: TierContext) -> View:
    """From ``proactive_share`` of the budget, start the next segments' summaries on the
    prefetcher's worker (nothing changes in the view: they are used only when needed)."""
    share = ctx.policy.proactive_share
    if ctx.prefetch is None or share is None or view.tokens <= share * ctx.budget:
        return view
    if _after_compaction(ctx):
        return view  # collapses are the compaction's fallback: not asked for ahead
    needed = view.tokens - ctx.target
    for segment in _candidates(view, ctx):
        covers = tuple(n for unit in segment for n in unit.node_ids)
        if reusable(ctx, "collapse", covers, "") is None:
            limit = summary_cap(ctx, segment)
            ctx.prefetch.ahead(
                segment_key(covers), request_for(ctx, "collapse", segment, max_tokens=limit)
            )
        needed -= sum(unit.tokens for unit in segment) - ctx.policy.collapse_summary_tokens
        if needed <= 0:
            break
    return view


def _after_compaction(ctx: TierContext) -> bool:
    """Whether auto-compact comes before collapse in the cascade (the claude-code preset):
    collapse is then the fallback for a prompt a compaction left over the budget (one that
    would not pay, say), never a follow-up that cuts a prompt already under it (each
    collapse rewrites the prompt from its segment on)."""
    order = {as_tier(name): index for index, name in enumerate(ctx.policy.cascade)}
    compact, collapse = order.get("compact"), order.get("collapse")
    return compact is not None and collapse is not None and compact < collapse


def collapse(view: View, ctx: TierContext) -> View:
    """Collapse the oldest segments until the prompt is under the low-water mark."""
    if _after_compaction(ctx) and view.tokens <= ctx.policy.threshold("collapse", ctx.budget):
        return view
    undone = any(as_layer_kind(i.kind) != "collapse" for i in ctx.graph.layers(active=False))
    for restored in (False, True) if undone else (False,):  # what a rollback restored last
        for segment in _candidates(view, ctx, restored=restored):
            if view.tokens <= ctx.target:
                return view
            view, error = collapse_segment(view, ctx, segment, reason="budget")
            if error is not None and error.summarizer:
                return view  # fail-open: leave the rest to the cheaper tiers
    return view


TIER = Tier("collapse", apply=ahead, compact=collapse, state=CollapseState)
