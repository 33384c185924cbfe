"""The working set: lines of the compacted history that the rounds kept after it name.

A compaction keeps the newest rounds and summarizes the rest; the summary lists
identifiers, but the line that says what ``parse_header`` returned, or which file
``E501`` was raised in, is gone from the prompt. The engine still has every covered node.
The rounds a compaction kept are what the agent works on next: the lines of the covered
nodes that name what those rounds name (paths, symbols, error codes), and that show an
identifier the prompt does not hold, come back in one small block right after the
compaction's summary (part of its unit: the tiers count it, the next compaction replaces
it), bounded by ``Policy.working_set_tokens``.

The block is a function of the layer and the rounds right after it, which never change:
it is made once per compaction, sits where the compaction rewrote the prompt anyway, and
stays the same bytes on every render until the next compaction (the prompt cache holds).
"""

from __future__ import annotations

import msgspec

from graph import Dialogue, Node, Tool, text_of

from .._summaries._identifiers import find_identifiers, message_text
from .._view import TURN_KINDS, Unit, View
from ._tier import TierContext

__all__ = ["WORKING_ROUNDS", "with_working_set", "working_block"]

WORKING_ROUNDS = 4
"""The rounds after a compaction's summary whose names choose the lines brought back."""
_SCAN_NODES = 400
"""Covered nodes scanned at most, newest first (a compaction of a long session covers
thousands)."""
_LINE_CHARS = 200
_TERM_CHARS = 6


def _node_texts(node: Node) -> list[str]:
    """What a stored node says: a message's text, a call's arguments and its result."""
    payload = node.payload
    if isinstance(payload, Dialogue):
        return [text_of(payload.content)]
    if isinstance(payload, Tool):
        result = "" if node.result is None else text_of(node.result.content)
        return [_arguments(payload), result]
    return []


def _arguments(tool: Tool) -> str:
    """A call's argument values, as the agent wrote them: its JSON keys are the tool's
    schema, which a request sends anyway, not something the history holds.

    >>> _arguments(Tool("Edit", '{"file_path": "a/b.py", "old_string": "x = f"}', "c1"))
    'a/b.py\\nx = f'
    """
    return message_text({"tool_calls": [{"function": {"arguments": tool.arguments}}]})


def _authored(node: Node) -> list[str]:
    """What the user or the agent wrote in a node (a tool's output is not)."""
    payload = node.payload
    if isinstance(payload, Dialogue) and payload.role in ("user", "assistant"):
        return [text_of(payload.content)]
    if isinstance(payload, Tool):
        return [_arguments(payload)]
    return []


def _nodes(ctx: TierContext, ids: tuple[str, ...] | list[str]) -> list[Node]:
    graph = ctx.graph
    return [graph.get(node_id) for node_id in ids if node_id in graph]


def working_block(
    ctx: TierContext, covers: list[str], kept: list[Unit], shown: set[str], size: int
) -> str:
    """The block's text (empty when nothing qualifies): lines of the ``covers`` nodes naming
    an identifier the ``kept`` rounds wrote and holding one the prompt (``shown``) lacks,
    those with the most such identifiers first, newest first among equals, within ``size``
    tokens; grouped by node, in history order."""
    terms = {
        ident
        for node in _nodes(ctx, [n for unit in kept for n in unit.node_ids])
        for text in _authored(node)
        for ident in find_identifiers(text)
        if len(ident) >= _TERM_CHARS
    }
    if not terms or size <= 0:
        return ""
    candidates: list[tuple[int, int, int, str, frozenset[str]]] = []
    for age, node in enumerate(reversed(_nodes(ctx, covers[-_SCAN_NODES:]))):
        for text in _node_texts(node):
            for number, line in enumerate(text.split("\n")):
                if not any(term in line for term in terms):
                    continue
                new = frozenset(find_identifiers(line)) - shown - terms
                if new:
                    clipped = line.strip()[:_LINE_CHARS]
                    candidates.append((-len(new), age, number, clipped, new))
    picked: dict[str, list[tuple[int, str]]] = {}
    order: dict[str, int] = {}
    seen: set[str] = set()
    used = 0
    ids = [node.id for node in reversed(_nodes(ctx, covers[-_SCAN_NODES:]))]
    for _score, age, number, line, new in sorted(candidates):
        if not (new - seen) or not line:
            continue
        cost = ctx.counter.count_text(line) + 2
        if used + cost > size:
            continue
        node_id = ids[age]
        if node_id not in picked:
            cost += 12
            if used + cost > size:
                continue
            picked[node_id] = []
            order[node_id] = age
        picked[node_id].append((number, line))
        seen |= new
        used += cost
    if not picked:
        return ""
    parts = ["[working set: lines of the compacted history naming what the rounds below name]"]
    for node_id in sorted(picked, key=lambda n: -order[n]):
        parts.append(f"node {ctx.handle(node_id)}:")
        parts.extend(f"  {line}" for _, line in sorted(picked[node_id]))
    return "\n".join(parts)


def with_working_set(view: View, ctx: TierContext) -> View:
    """``view`` with the working set after its newest compaction's summary, as part of
    the summary's unit: the tiers count it, and the next compaction takes it with the
    summary."""
    policy = ctx.policy
    budget = ctx.nominal_budget or ctx.budget
    size = min(policy.working_set_tokens, int(policy.working_set_share * budget))
    book = ctx.layers
    if not size or book is None:
        return view
    units = view.units
    at = next((i for i in range(len(units) - 1, -1, -1) if units[i].layer is not None), None)
    if at is None:
        return view
    layer_id = units[at].layer
    assert layer_id is not None
    try:
        layer = book.get(layer_id).layer
    except Exception:  # fail-open: a layer another process removed
        return view
    upto = layer.meta.get("kept_upto")
    kept = _kept(units[at + 1 :], upto)
    if not kept:
        return view
    key = ("working", layer_id, size)
    block = ctx.summaries.get(key)
    if block is None:
        shown = _shown(ctx, units[: at + 1], kept)
        block = working_block(ctx, list(layer.covers), kept, shown, size)
        ctx.summaries[key] = block
    if not block:
        return view
    item = ctx.item({"role": "user", "content": block}, None, "working")
    unit = msgspec.structs.replace(units[at], items=(*units[at].items, item))
    return view.replace([*units[:at], unit, *units[at + 1 :]])


def _kept(after: tuple[Unit, ...], upto: object) -> list[Unit]:
    """The rounds the compaction kept: those after its summary up to the one holding
    ``upto``, the newest node of the prompt it was made in (none without one)."""
    if not isinstance(upto, str):
        return []
    kept: list[Unit] = []
    for unit in after:
        if unit.kind in TURN_KINDS:
            kept.append(unit)
        if upto in unit.node_ids:
            return kept[-WORKING_ROUNDS:]
    return []


def _shown(ctx: TierContext, before: tuple[Unit, ...], kept: list[Unit]) -> set[str]:
    """Identifiers the prompt holds anyway: the summary and what precedes it, and the kept
    rounds as stored (so the block depends on the layer and those rounds only)."""
    texts = [message_text(item.message) for unit in before for item in unit.items]
    nodes = _nodes(ctx, [n for unit in kept for n in unit.node_ids])
    texts += [text for node in nodes for text in _node_texts(node)]
    return {ident for text in texts for ident in find_identifiers(text)}
