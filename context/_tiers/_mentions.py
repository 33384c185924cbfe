"""What a placeholder says it hides: the identifiers of a cleared output, or of the part of
an output an offload preview or a budget reduction elides, so the model sees which hidden
output holds what it needs and reads that one back (``read_output``).

The list is ranked as a summary's is (the most used first) and sized by
``Policy.stub_identifier_tokens``; it depends only on the hidden text, so a placeholder is
the same bytes in every engine and on every render (the prompt cache holds).
"""

from __future__ import annotations

from collections.abc import Sequence

from graph import text_of

from .._budget._tokens import utf8_length
from .._summaries._identifiers import cap_identifiers, rank_identifiers, ranked_identifiers
from .._view import Item
from ._tier import TierContext

__all__ = ["MENTION_SCAN_CHARS", "mentioned", "original_output"]


def original_output(item: Item, ctx: TierContext) -> str:
    """The text a tool item stands for, whatever variant shows it now (so a placeholder
    made from it is the same in every engine)."""
    node_id = item.node_id
    node = ctx.graph.get(node_id) if node_id is not None and node_id in ctx.graph else None
    result = getattr(node, "result", None)
    return text_of(item.message.get("content") if result is None else result.content)


MENTION_SCAN_CHARS = 200_000
"""A placeholder's list is ranked from at most this many characters of what it hides, in
ten even slices: a 20 MB output is not scanned whole on the render path."""


def mentioned(text: str, ctx: TierContext, first: Sequence[str] = ()) -> tuple[str, ...]:
    """The identifiers a placeholder lists for ``text``, which it hides (its size taken at
    four bytes a token: the same list whatever the tokenizer's cache holds); ``first``
    (what the call asked for, ``_asked``) ahead of the most used."""
    budget = ctx.nominal_budget or ctx.budget
    size = ctx.policy.stub_identifier_tokens(utf8_length(text) // 4, budget)
    if not size:
        return ()
    if len(text) > MENTION_SCAN_CHARS:
        piece = MENTION_SCAN_CHARS // 10
        step = (len(text) - piece) // 9
        text = "\n".join(text[i * step : i * step + piece] for i in range(10))
    if first:
        return cap_identifiers([*first, *ranked_identifiers([text])], ctx.counter, size)
    return rank_identifiers([text], ctx.counter, size)
