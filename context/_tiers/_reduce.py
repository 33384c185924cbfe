"""Budget reduction: a long tool output keeps its head and tail.

Deterministic and byte-stable: the same output always reduces to the same bytes, so the
prompt cache holds from one turn to the next. In ``policy.always`` it runs every turn (the
seed's design); the claude-code preset runs it once a prompt does not fit, and what it
reduced stays reduced. Out of ``policy.always`` it acts only over its own trigger: never as
a follow-up that takes a prompt already under the budget down to the low-water mark (room
for the next turns is what the summarizing tiers make; cutting the newest outputs for it
lost what the agent quoted next: at 160k on ``cd``, recall 0.985 → 0.967 with it after
auto-compact).
"""

from __future__ import annotations

import json
import time
from typing import Any

import msgspec

from graph import ChatMessage, text_of

from .._budget._cut import elided_part, middle_truncate
from .._budget._readback import is_history_tool
from .._view import Item, View, map_items
from ._mentions import mentioned
from ._tier import Tier, TierContext, TierState


def reduced_call(call: Any, limit: int, head: int, tail: int, node_id: str | None) -> Any:
    """A tool call whose string arguments over ``limit`` characters keep ``head`` and
    ``tail`` (the arguments stay valid JSON); the same object when none is that long.

    >>> call = {"id": "c1", "function": {"name": "Write", "arguments": '{"content": "abcdefgh"}'}}
    >>> reduced_call(call, 4, 2, 1, None)["function"]["arguments"]
    '{"content": "ab\\\\n[... 5 characters elided ...]\\\\nh"}'
    """
    function = call.get("function") if isinstance(call, dict) else None
    raw = function.get("arguments") if isinstance(function, dict) else None
    if not isinstance(raw, str) or len(raw) <= limit:
        return call
    try:
        arguments = json.loads(raw)
    except ValueError:
        short = middle_truncate(raw, head, tail, node_id)
    else:
        shortened = _reduced_value(arguments, limit, head, tail, node_id)
        short = raw if shortened == arguments else json.dumps(shortened, ensure_ascii=False)
    if short == raw:
        return call
    assert isinstance(function, dict)
    return {**call, "function": {**function, "arguments": short}}


def _reduced_value(value: Any, limit: int, head: int, tail: int, node_id: str | None) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else middle_truncate(value, head, tail, node_id)
    if isinstance(value, dict):
        return {k: _reduced_value(v, limit, head, tail, node_id) for k, v in value.items()}
    if isinstance(value, list):
        return [_reduced_value(v, limit, head, tail, node_id) for v in value]
    return value


def reduce_item(item: Item, ctx: TierContext) -> Item:
    done = ctx.memoized(item.node_id, "reduced")
    if done is not None:
        return done
    policy = ctx.policy
    text = text_of(item.message.get("content"))
    if len(text) <= policy.budget_reduction_chars:
        return item
    head, tail = policy.reduction_head_chars, policy.reduction_tail_chars
    mentions = mentioned(elided_part(text, head, tail), ctx)
    ref = None if item.node_id is None else ctx.handle(item.node_id)
    reduced = middle_truncate(text, head, tail, ref, mentions)
    message: ChatMessage = {**item.message, "content": reduced}
    return ctx.item(message, item.node_id, "reduced", item.tool_name)


class ReductionState(TierState):
    """Outputs reduced so far: kept reduced on later renders (when the tier is not in
    ``policy.always``, it acts only when needed, so this is what makes it sticky)."""

    nodes: set[str] = msgspec.field(default_factory=set)


def _reduce(view: View, ctx: TierContext, only: set[str] | None) -> tuple[View, list[str]]:
    def change(item: Item) -> Item:
        if item.message.get("role") != "tool" or item.variant != "full":
            return item
        if is_history_tool(item.tool_name):
            return item  # a page of what is stored: reducing it points back at itself
        if only is not None and item.node_id not in only:
            return item
        return reduce_item(item, ctx)

    after, changed = map_items(view, change, outputs_only=ctx.incremental)
    if changed:
        what = f"reduced {len(changed)} tool output(s)"
        ctx.act("budget_reduction", what, view, after, tuple(changed))
    return after, changed


def reapply(view: View, ctx: TierContext) -> View:
    """Keep reduced what an earlier over-budget render reduced."""
    state = ctx.state(ReductionState)
    if not state.nodes or ctx.tier in ctx.policy.always:
        return view
    return _reduce(view, ctx, state.nodes)[0]


def budget_reduction(view: View, ctx: TierContext) -> View:
    """Shorten every tool output over ``policy.budget_reduction_chars``; outputs reduced for
    the first time get a record."""
    policy = ctx.policy
    if ctx.tier not in policy.always and view.tokens <= policy.threshold(ctx.tier, ctx.budget):
        return view  # over the low-water mark only: room for later turns is the summaries' job
    started = time.perf_counter()
    after, changed = _reduce(view, ctx, None)
    state = ctx.state(ReductionState)
    new = [node for node in changed if node not in state.nodes]
    if new:
        state.nodes.update(new)
        ctx.record("budget_reduction", view, after, started=started, details={"reduced": new})
    return after


TIER = Tier("budget_reduction", apply=reapply, compact=budget_reduction, state=ReductionState)
