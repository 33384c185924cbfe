"""Tier 4, auto-compact: one structured summary of everything but the newest rounds.

The summary carries the five anchors, prose, the identifiers, the offloaded outputs it
covers and node ids worth inspecting, under a plainly marked ``[Context Compaction]``
message; the newest user messages of the covered part stay verbatim before it (within
``compact_user_tokens``), as Codex keeps them. It is incremental: a compaction builds on
the previous one (its layer is covered, its anchors merged as a union), and it is a layer,
so unlike Claude Code's it can be rolled back. The system prompt and the first task are
pinned and never summarized.

``summarize_half`` is progressive's soft step: the same, over the oldest half only.

The budget's compaction covers the span prepared ahead (``_compact_ahead``) when it starts
the span, then the rest; the tiers themselves (``TIER``, ``HALF_TIER``) are in
``_compact_ahead``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import msgspec

from graph import HANDLE_KEY, ChatMessage, LayerInfo, text_of

from .._budget._names import as_layer_kind
from .._budget._policy import Policy
from .._errors import ContextError
from .._summaries._identifiers import find_identifiers, message_text
from .._summaries._summary import SummaryRequest, SummaryResult
from .._view import Unit, UnitKind, View
from ._awaiting import NOT_READY
from ._collapse import first_node, follows, grown, inspectable, pays
from ._summarizing import (
    make_layer,
    new_layer_id,
    record_layer,
    request_for,
    result_of,
    reusable,
    segment_key,
    span,
    summarize,
)
from ._tier import TierContext, TierState

_INSPECT = 8
ADDED_KINDS: tuple[UnitKind, ...] = ("note", "stub")


class CompactState(TierState):
    """Spans whose summary failed or was no shorter (not tried again by the budget), and
    the tokens of new rounds, by first node, whose compaction did not pay (tried again once
    they have grown by ``payoff_retry_tokens``)."""

    failed: set[str] = msgspec.field(default_factory=set)
    declined: dict[str, int] = msgspec.field(default_factory=dict)
    prepared: list[str] = msgspec.field(default_factory=list)
    """The nodes a summary computed ahead covers (empty: none is), under ``AHEAD`` and
    the span's key in the prefetcher..."""
    owed: bool = False
    """...and whether a render went without it (the next render it is done by adopts it)."""


AHEAD = "compact:"
HALF = 0.5
"""summarize_half's share of what a compaction would cover."""


def kept_by_messages(sizes: Iterable[int], limit: int) -> int:
    """How many units, newest first (``sizes``: their message counts), make up the newest
    ``limit`` messages (the last one may go past it)."""
    kept = messages = 0
    for size in sizes:
        if messages >= limit:
            break
        kept += 1
        messages += size
    return kept


def _keep_count(units: list[Unit], ctx: TierContext, *, manual: bool = False) -> int:
    """How many of the newest units stay as they are (by hand: just the newest rounds)."""
    policy = ctx.policy
    if policy.compact_keep_messages is not None:
        newest = (len(unit.items) for unit in reversed(units))
        return kept_by_messages(newest, policy.compact_keep_messages)
    keep = min(len(units), max(1, policy.compact_keep_rounds))
    if manual:
        return keep
    room = int(ctx.target * policy.compact_keep_share)
    used = sum(unit.tokens for unit in units[len(units) - keep :])
    for unit in reversed(units[: len(units) - keep]):
        if unit.pinned or used + unit.tokens > room:
            break
        used += unit.tokens
        keep += 1
    return keep


def span_to_compact(
    view: View, ctx: TierContext, *, share: float = 1.0, manual: bool = False
) -> list[Unit]:
    """The adjacent units a compaction covers: after the pinned prefix, before the newest
    kept units and anything running; ``share`` of them, oldest first. Rounds a person
    rolled a layer back from are left as they are (by the budget; by hand, anything goes)."""
    units = list(view.units)
    if not units:
        return []
    keep = _keep_count(units, ctx, manual=manual)
    body = units[: len(units) - keep]
    declined: frozenset[str] = frozenset()
    if not manual:
        rolled_back = ctx.graph.layers(active=False)
        declined = frozenset(n for i in rolled_back for n in i.covers)
    run: list[Unit] = []
    for unit in body:
        if unit.pinned and not is_compaction(unit, ctx):
            if run:
                break
            continue
        if unit.running or unit.kind in ADDED_KINDS or not declined.isdisjoint(unit.node_ids):
            if run:
                break
            continue
        if run and not follows(run[-1], unit):
            break  # snipped units between: a layer covers units adjacent in the walk
        run.append(unit)
    return oldest(run, share, ctx)


def oldest(run: list[Unit], share: float, ctx: TierContext) -> list[Unit]:
    """``share`` of ``run``'s units, oldest first; none when that is only the previous
    compaction (nothing new to merge)."""
    if share < 1.0:
        run = run[: max(1, int(len(run) * share))] if len(run) > 1 else []
    if len(run) == 1 and is_compaction(run[0], ctx):
        return []
    return run


def is_compaction(unit: Unit, ctx: TierContext) -> bool:
    if unit.kind != "layer" or unit.layer is None or ctx.layers is None:
        return False
    return as_layer_kind(ctx.layers.get(unit.layer).kind) == "compact"


def _offloaded(covered: list[Unit], ctx: TierContext) -> list[str]:
    lines = []
    for unit in covered:
        for item in unit.items:
            if item.variant == "offloaded" and item.node_id:
                first = text_of(item.message.get("content")).split("\n", 1)[0]
                lines.append(f"- node {ctx.handle(item.node_id)}: {first.strip('[]')[:160]}")
    return lines[:_INSPECT]


def _recent_users(covered: list[Unit], ctx: TierContext) -> list[ChatMessage]:
    """The newest user messages of the covered part, verbatim, within the policy's share."""
    room = ctx.policy.compact_user_tokens
    chosen: list[ChatMessage] = []
    for unit in reversed(covered):
        if unit.kind != "round":
            continue
        for item in reversed(unit.items):
            if item.message.get("role") != "user":
                continue
            if item.tokens > room:
                return list(reversed(chosen))
            room -= item.tokens
            chosen.append(item.message)
    return list(reversed(chosen))


def compaction_text(
    handle: str,
    rounds: int,
    where: str,
    result: SummaryResult,
    policy: Policy,
    *,
    offloaded: list[str],
    inspect: list[str],
) -> str:
    """The text of a compaction layer: what it covers and how to read it back, the summary,
    the offloaded outputs it covers and the functions worth inspecting."""
    parts = [
        f"[Context Compaction] {rounds} earlier round(s) ({where}) are summarized "
        f'below to fit the context window. expand_layer("{handle}") returns the original '
        "messages; inspect_node with a node id reads any one of them.",
        result.text(identifiers=policy.identifier_tokens > 0),
    ]
    if offloaded:
        parts += ["## Offloaded References", *offloaded]
    if inspect:
        parts += ["## Nodes to inspect", *inspect]
    return "\n".join(parts)


def _shown(view: View, covered: list[Unit]) -> frozenset[str]:
    """The identifiers of what a compaction of ``covered`` leaves in the prompt."""
    gone = {id(unit) for unit in covered}
    kept = (item.message for unit in view.units if id(unit) not in gone for item in unit.items)
    return frozenset(ident for message in kept for ident in find_identifiers(message_text(message)))


def _previous(ctx: TierContext, covered: list[Unit]) -> SummaryResult | None:
    """The summary of the previous compaction ``covered`` merges, if any."""
    previous_layers = [u for u in covered if is_compaction(u, ctx)]
    if not previous_layers or ctx.layers is None:
        return None
    assert previous_layers[-1].layer is not None
    return result_of(ctx.layers.get(previous_layers[-1].layer))


def compaction_request(
    view: View, ctx: TierContext, covered: list[Unit], focus: str | None
) -> SummaryRequest:
    fresh = [u for u in covered if not is_compaction(u, ctx)]
    policy = ctx.policy
    request = request_for(
        ctx,
        "compact",
        fresh,
        max_tokens=policy.compact_summary_bound(sum(u.tokens for u in fresh), ctx.target),
        previous=_previous(ctx, covered),
        focus=focus,
    )
    if policy.identifier_tokens > 0:
        request = msgspec.structs.replace(request, shown=_shown(view, covered))
    return request


def compact_span(
    view: View,
    ctx: TierContext,
    covered: list[Unit],
    *,
    focus: str | None,
    reason: str,
    key: str | None = None,
) -> tuple[View, LayerInfo | None, str | None]:
    """Replace ``covered`` by one compaction layer; returns the view, the layer, and why
    not when there is none (``NOT_READY``: its summary, under ``key``, is being prepared)."""
    started = time.perf_counter()
    policy = ctx.policy
    tier = ctx.tier or "compact"  # summarize_half records as itself
    previous = _previous(ctx, covered)
    fresh = [u for u in covered if not is_compaction(u, ctx)]
    covers = tuple(n for unit in covered for n in unit.node_ids)
    result = reusable(ctx, "compact", covers, focus or "")
    error, ms = None, 0.0
    if result is None:
        request = compaction_request(view, ctx, covered, focus)
        result, error, ms = summarize(ctx, request, key, wait=reason != "budget")
    if result is None:
        if error == NOT_READY:
            ctx.act(tier, "went without its summary (being prepared)", view, view)
            return view, None, error
        if reason == "budget":
            ctx.state(CompactState).failed.add(segment_key(covered))
        ctx.act(tier, f"could not summarize: {error}", view, view, error=error)
        ctx.record(tier, view, view, started=started, error=error)
        return view, None, error
    layer_id = new_layer_id(ctx, [n for unit in covered for n in unit.node_ids], "compact")
    handle = ctx.layers.next_handle() if ctx.layers is not None else layer_id
    rounds = sum(unit.count for unit in covered)
    text = compaction_text(
        handle,
        rounds,
        span(covered, ctx),
        result,
        policy,
        offloaded=_offloaded(covered, ctx),
        inspect=inspectable(covered, ctx),
    )
    messages: list[ChatMessage] = [*_recent_users(fresh, ctx), {"role": "user", "content": text}]
    tokens = ctx.counter.count_messages(messages)
    declined = _declined(ctx, covered, fresh, tokens) if reason == "budget" else None
    if declined is not None:
        state = ctx.state(CompactState)
        state.failed.add(segment_key(covered))  # not asked again
        state.declined[first_node(fresh)] = sum(unit.tokens for unit in fresh)
        return view, None, declined
    meta = {
        "reason": reason,
        "rounds": rounds,
        "focus": focus,
        "pinned": True,
        "summary_key": focus or "",
        HANDLE_KEY: handle,
        "kept_upto": next((u.node_ids[-1] for u in reversed(view.units) if u.node_ids), None),
    }
    after, info = make_layer(view, ctx, "compact", covered, messages, result, meta, layer_id)
    ctx.act(tier, f"compacted {rounds} round(s) into layer {info.id}", view, after)
    details = {
        "layer": info.id,
        "reason": reason,
        "focus": focus,
        "incremental": previous is not None,
    }
    record_layer(
        ctx, tier, view, after, covered, result, text, started=started, ms=ms, details=details
    )
    return after, info, None


def _declined(ctx: TierContext, covered: list[Unit], fresh: list[Unit], tokens: int) -> str | None:
    """Why a budget compaction of ``tokens`` is not worth making, or None: it must be shorter
    than what it covers, leave room under the low-water mark, and save ``payoff_share`` of
    the new rounds (the previous summary it merges does not count as saved)."""
    if tokens >= sum(unit.tokens for unit in covered):
        return "the compaction is no shorter than what it covers"
    if tokens > ctx.target // 2:
        return "the compaction would leave no room under the low-water mark"
    fresh_tokens = sum(unit.tokens for unit in fresh)
    merged = sum(unit.tokens for unit in covered) - fresh_tokens
    if not pays(ctx, fresh_tokens, max(0, tokens - merged)):
        return f"the compaction would save less than {ctx.policy.payoff_share:.0%}"
    return None


def _auto(view: View, ctx: TierContext, share: float) -> View:
    """Compact the prepared span if it starts the span, and then, while the prompt is
    still over the low-water mark, the rest (merging that summary); else the whole span."""
    state = ctx.state(CompactState)
    part = _prepared_part(span_to_compact(view, ctx, share=share), state.prepared)
    if part is None:
        return _auto_span(view, ctx, share, None)
    after = _auto_span(view, ctx, share, part)
    if state.owed or after.tokens <= ctx.target:
        return after
    return _auto_span(after, ctx, share, None)  # the rest, or all when the part was too small


def _auto_span(view: View, ctx: TierContext, share: float, part: list[Unit] | None) -> View:
    state = ctx.state(CompactState)
    covered = part if part is not None else span_to_compact(view, ctx, share=share)
    if not covered or segment_key(covered) in state.failed:
        return view
    fresh = [u for u in covered if not is_compaction(u, ctx)]
    fresh_tokens = sum(u.tokens for u in fresh)
    if too_little(ctx, fresh_tokens):
        return view
    if not grown(ctx, state.declined, first_node(fresh), fresh_tokens):
        return view
    key = AHEAD + segment_key(covered) if ctx.prefetch is not None else None
    after, _, error = compact_span(view, ctx, covered, focus=None, reason="budget", key=key)
    owed = error == NOT_READY
    state.prepared = [n for unit in covered for n in unit.node_ids] if owed else []
    state.owed = owed
    return after


def too_little(ctx: TierContext, fresh_tokens: int) -> bool:
    """Whether a budget compaction taking in ``fresh_tokens`` of new rounds is not made
    (``compact_min_fresh_share``): rewriting the summary for so little costs more than it
    saves."""
    least = ctx.policy.compact_min_fresh_share
    return least is not None and fresh_tokens < least * ctx.budget


def _prepared_part(units: list[Unit], prepared: list[str]) -> list[Unit] | None:
    """The first of ``units`` that cover exactly the ``prepared`` nodes (None: they do not
    start ``units``, or end inside a unit)."""
    if not prepared:
        return None
    part: list[Unit] = []
    covered = 0
    for unit in units:
        if covered == len(prepared):
            break
        ids = unit.node_ids
        if list(ids) != prepared[covered : covered + len(ids)]:
            return None
        part.append(unit)
        covered += len(ids)
    return part if covered == len(prepared) else None


def compact(view: View, ctx: TierContext) -> View:
    """Summarize all but the newest rounds into one compaction."""
    return _auto(view, ctx, 1.0)


def summarize_half(view: View, ctx: TierContext) -> View:
    """Summarize the oldest half of what a compaction would cover."""
    return _auto(view, ctx, HALF)


def compact_now(view: View, ctx: TierContext, focus: str | None) -> tuple[View, LayerInfo]:
    """``/compact [focus]``: compact now, whatever the budget."""
    covered = span_to_compact(view, ctx, manual=True)
    if not covered:
        raise ContextError("nothing to compact: every unit is pinned, running or among the newest")
    ctx.tier = "compact"
    after, info, error = compact_span(view, ctx, covered, focus=focus, reason="manual")
    if info is None:
        raise ContextError(f"compaction failed: {error}")
    return after, info
