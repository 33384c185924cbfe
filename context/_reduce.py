"""Budget reduction: every turn, a long tool output keeps its head and tail.

Deterministic and byte-stable: the same output always reduces to the same bytes, so the
prompt cache holds from one turn to the next.
"""

from __future__ import annotations

from graph import text_of

from ._tier import TierContext
from ._view import Item, View, map_items


def middle_truncate(text: str, head: int, tail: int, node_id: str | None) -> str:
    """Keep ``head`` leading and ``tail`` trailing characters with a marker between.

    >>> middle_truncate("a" * 10 + "b" * 10, 3, 2, "N1")
    'aaa\\n[... 15 characters elided from node N1; read_output("N1") returns all ...]\\nbb'
    """
    elided = len(text) - head - tail
    if elided <= 0:
        return text
    where = f' from node {node_id}; read_output("{node_id}") returns all' if node_id else ""
    tail_text = text[len(text) - tail :] if tail else ""
    return f"{text[:head]}\n[... {elided} characters elided{where} ...]\n{tail_text}"


def reduce_item(item: Item, ctx: TierContext) -> Item:
    done = ctx.memoized(item.node_id, "reduced")
    if done is not None:
        return done
    policy = ctx.policy
    text = text_of(item.message.get("content"))
    if len(text) <= policy.budget_reduction_chars:
        return item
    reduced = middle_truncate(
        text, policy.reduction_head_chars, policy.reduction_tail_chars, item.node_id
    )
    message = {**item.message, "content": reduced}
    return ctx.item(message, item.node_id, "reduced", item.tool_name)


def budget_reduction(view: View, ctx: TierContext) -> View:
    """Shorten every tool output over ``policy.budget_reduction_chars``."""

    def change(item: Item) -> Item:
        if item.message.get("role") == "tool" and item.variant == "full":
            return reduce_item(item, ctx)
        return item

    after, changed = map_items(view, change)
    if changed:
        ctx.act(
            "budget_reduction",
            f"reduced {len(changed)} tool output(s)",
            view,
            after,
            tuple(changed),
        )
    return after
