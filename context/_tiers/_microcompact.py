"""Tier 1, microcompact: clear old outputs of compactable tools, keep the newest N.

It fires by count (first at ``microcompact_first`` tool calls, then every
``microcompact_every``) or when the conversation sat idle longer than the prompt cache
lives (``microcompact_idle_minutes`` since the last assistant message), and clears what
was older than the newest ``microcompact_keep`` at that moment. Between firings the
cleared set does not move, so the prompt prefix stays byte-stable. A rollback shows the
outputs it restored whole again, until the next firing decides on them.

For Anthropic models (``policy.use_cache_edits``) messages stay as they are and the render
carries a ``clear_tool_uses_20250919`` context edit instead: the server clears, the cache
holds.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import msgspec

from graph import ChatMessage

from .._view import Item, Variant, View, map_items, unit_tools
from ._mentions import mentioned, original_output
from ._tier import Tier, TierContext, TierState, restored_since

_CLEARED: tuple[Variant, ...] = ("cleared", "edit-cleared")


class MicrocompactState(TierState):
    """Compactable outputs before this ordinal of the walk's list are cleared, but for the
    ``restored`` ones: outputs a rollback since the last firing brought back (shown whole
    until the tier fires again)."""

    cleared_upto: int = 0
    trigger_count: int = 0
    rollbacks: int = -1
    """Rolled-back layers seen (-1: not counted yet)."""
    restored: set[str] = msgspec.field(default_factory=set)


def _restore(state: MicrocompactState, ctx: TierContext, ids: list[str]) -> None:
    """Exempt the cleared outputs the rollbacks since the last render restored."""
    state.rollbacks, covered = restored_since(ctx, state.rollbacks)
    if covered and state.cleared_upto > 0:
        state.restored |= covered.intersection(ids[: state.cleared_upto])


def cleared_text(node_id: str, tool_name: str | None, mentions: Sequence[str] = ()) -> str:
    """The short, byte-stable placeholder of a cleared output, with the identifiers it
    mentioned (``Policy.stub_identifier_share``).

    >>> cleared_text("N1", "Bash", ["src/app.py", "parse_header"])
    '[old Bash output cleared; read_output("N1") returns it; it mentioned src/app.py, parse_header]'
    """
    name = f"{tool_name} " if tool_name else ""
    listed = f"; it mentioned {', '.join(mentions)}" if mentions else ""
    return f'[old {name}output cleared; read_output("{node_id}") returns it{listed}]'


def _trigger_point(count: int, first: int, every: int) -> int:
    if count < first:
        return 0
    return first + ((count - first) // every) * every


def _idle(view: View, ctx: TierContext) -> bool:
    last = next(
        (
            item.node_id
            for unit in reversed(view.units)
            for item in reversed(unit.items)
            if item.message.get("role") == "assistant" and item.node_id in ctx.graph
        ),
        None,
    )
    if last is None:
        return False
    idle = (ctx.now - ctx.graph.get(last).at).total_seconds() / 60
    return idle >= ctx.policy.microcompact_idle_minutes


def apply_cleared(
    view: View, ctx: TierContext, cleared: set[str], *, keep_messages: bool = False
) -> tuple[View, list[str]]:
    """Replace cleared outputs by placeholders; with ``keep_messages`` only their token
    counts change (the server clears them, as a context edit asks)."""

    def change(item: Item) -> Item:
        if item.node_id not in cleared or item.message.get("role") != "tool":
            return item
        if item.variant in _CLEARED:
            return item
        assert item.node_id is not None
        if keep_messages:  # the server leaves its own placeholder: count a bare one
            text = cleared_text(ctx.handle(item.node_id), item.tool_name)
            bare = ctx.item({**item.message, "content": text}, item.node_id, "edit-placeholder")
            return Item(item.message, bare.tokens, item.node_id, item.tool_name, "edit-cleared")
        new = ctx.memoized(item.node_id, "cleared")
        if new is None:
            mentions = mentioned(original_output(item, ctx), ctx)
            text = cleared_text(ctx.handle(item.node_id), item.tool_name, mentions)
            message: ChatMessage = {**item.message, "content": text}
            new = ctx.item(message, item.node_id, "cleared", item.tool_name)
        if new.tokens >= item.tokens:
            return item  # a placeholder no shorter than the output would only add tokens
        return new

    return map_items(view, change)


def context_edit(ctx: TierContext, excluded: list[str]) -> dict[str, Any]:
    policy = ctx.policy
    return {
        "type": "clear_tool_uses_20250919",
        "trigger": {
            "type": "input_tokens",
            "value": max(1, int(ctx.budget * policy.snip_low_water)),
        },
        "keep": {"type": "tool_uses", "value": policy.microcompact_keep},
        "clear_at_least": {"type": "input_tokens", "value": 1_000},
        "exclude_tools": sorted(set(excluded)),
    }


def reapply(view: View, ctx: TierContext) -> View:
    """Every turn: clear what earlier firings cleared, and fire on idle (cache is cold)."""
    return _run(view, ctx, count_trigger=False)


def microcompact(view: View, ctx: TierContext) -> View:
    """The cascade tier: fire at the count trigger when the prompt does not fit."""
    return _run(view, ctx, count_trigger=True)


def _run(view: View, ctx: TierContext, *, count_trigger: bool) -> View:
    policy = ctx.policy
    started = time.perf_counter()
    if ctx.compactable is None:  # called outside an engine: this view is the whole walk
        ids: list[str] = []
        others: set[str] = set()
        for unit in view.units:
            unit_ids, unit_others = unit_tools(unit, policy.tool_category)
            ids += unit_ids
            others |= unit_others
        ctx.compactable, ctx.kept_tools = ids, sorted(others)
    ids = ctx.compactable  # the whole walk's list: a reapplied snip must not shift it
    count = len(ids)
    state = ctx.state(MicrocompactState)
    _restore(state, ctx, ids)
    upto = state.cleared_upto
    trigger = ""
    point = _trigger_point(count, policy.microcompact_first, policy.microcompact_every)
    if count_trigger and point > state.trigger_count:
        state.trigger_count = point
        if point - policy.microcompact_keep > upto:
            upto = point - policy.microcompact_keep
            trigger = f"count {point}"
    if not count_trigger and count - policy.microcompact_keep > upto and _idle(view, ctx):
        upto = count - policy.microcompact_keep
        trigger = "idle"
    if upto <= 0:
        return view
    state.cleared_upto = upto
    if trigger:
        state.restored = set()  # a new firing decides on the restored outputs too
    cleared = set(ids[:upto]).difference(state.restored)
    edits = policy.use_cache_edits
    if edits:
        ctx.edits[:] = [context_edit(ctx, ctx.kept_tools)]
    after, changed = apply_cleared(view, ctx, cleared, keep_messages=edits)
    if changed:
        how = "context edit clears" if edits else "cleared"
        what = f"{how} {len(changed)} old tool output(s)"
        ctx.act("microcompact", what, view, after, tuple(changed))
    if trigger and changed:  # a firing that changed nothing shown is no decision to record
        details: dict[str, Any] = {"trigger": trigger, "cleared": len(cleared)}
        if edits:
            details["cache_edits"] = True
        ctx.record("microcompact", view, after, started=started, details=details)
    return after


TIER = Tier("microcompact", apply=reapply, compact=microcompact, state=MicrocompactState)
