"""A first render's backlog, planned from the conversation chain before any walk.

A long imported history is a plain chain of dialogue nodes and their tools. Walking it
(a step per node), grouping it into units (a message per node) and estimating it costs
several times what reading it from the database did. Here the backlog is found on the chain
itself, from the payloads' lengths: the pinned prefix (system prompts and the task), the
newest rounds within the compaction's share of the low-water mark, and between them a span
of whole rounds. Its layer stands over the span as a single placeholder, the layout
checkpoint it is saved with says so, and the layout then walks only the prefix and the
kept rounds, as it does for any checkpoint. Only the rounds a summary request samples are
made into messages.

A chain with anything else in the span (a function, a system prompt, a tool without its
result, a provider's own compaction) is left to :func:`~context._render._backlog.compact_backlog`,
which works on the full walk.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from graph import (
    ChatMessage,
    Dialogue,
    GraphState,
    Node,
    Step,
    Tool,
    dialogue_message,
    text_of,
    visible,
)

from .._tiers._tier import TierContext
from .._view import RawUnit, Unit
from ._backlog import (
    _ARGUMENT_CHARS,
    _OUTPUT_HEAD,
    _OUTPUT_TAIL,
    _TEXT_CHARS,
    MIN_UNITS,
    Span,
    backlog_layer,
)
from ._checkpoint import Checkpoint, sealed
from ._layout import Grouper, group_steps

_OVERHEAD = 4


def chain_backlog(state: GraphState, head: str | None, ctx: TierContext) -> Checkpoint | None:
    """Decide the backlog's layer from the chain to ``head`` and return the checkpoint the
    layout starts from (its layer pending until the render commits); None when the chain is
    short, fits, or is not a plain run of rounds where the backlog would be."""
    started = time.perf_counter()
    policy = ctx.policy
    if head is None or policy.backlog_budgets is None or ctx.layers is None:
        return None
    if state.ancestry(head):
        return None
    chain = state.chain(head)
    if len(chain) < MIN_UNITS:
        return None
    nodes = state.nodes
    first = 0
    while first < len(chain) and _role(nodes[chain[first]]) == "system":
        first += 1
    if first >= len(chain) or _role(nodes[chain[first]]) != "user":
        return None
    first += 1  # after the task
    sizes = [_chars(state, nodes[node_id]) for node_id in chain]
    if sum(whole for whole, _ in sizes) // 4 <= policy.backlog_budgets * ctx.budget:
        return None
    end = _tail(state, chain, sizes, ctx)
    if end is None or end - first < MIN_UNITS // 2:
        return None
    bounds = _rounds(state, chain, first, end)
    if bounds is None:
        return None
    tools = state.tools
    covers = tuple(n for node_id in chain[first:end] for n in (node_id, *tools.get(node_id, ())))
    ctx.units = []  # the pinned units, for the summary's task and system text
    prefix = visible(state, chain[first - 1])
    units = group_steps(prefix)
    span = Span(
        [sum(sizes[i][0] for i in range(a, b)) // 4 + _OVERHEAD * (b - a) for a, b in bounds],
        [sum(sizes[i][1] for i in range(a, b)) // 4 + _OVERHEAD * (b - a) for a, b in bounds],
        lambda index: _round(state, chain, bounds[index]),
        covers,
        _users(state, chain, first, end),
        [],
    )
    ctx.units = [_pinned(ctx, unit, position) for position, unit in enumerate(units) if unit.pinned]
    info = backlog_layer(ctx, span, started)
    if info is None:
        return None
    around = (chain[first - 1], chain[end - 1], chain[end])
    steps = (len(prefix), len(prefix) + len(covers))
    one = [("round", len(covers), 1)]  # the span as a single placeholder
    return sealed(state, info.id, (len(units), len(units) + 1), steps, around, one)


def _role(node: Node) -> str | None:
    payload = node.payload
    return payload.role if isinstance(payload, Dialogue) else None


def _chars(state: GraphState, node: Node) -> tuple[int, int]:
    """Characters of a chain node and its tools: all, and as a summary request reads them."""
    payload = node.payload
    if not isinstance(payload, Dialogue):
        return 0, 0
    content = payload.content
    length = len(content) if isinstance(content, str) else len(text_of(content))
    whole, short = length, min(length, _TEXT_CHARS + 100)
    nodes = state.nodes
    for tool_id in state.tools.get(node.id, ()):
        tool = nodes[tool_id]
        call = tool.payload
        assert isinstance(call, Tool)
        arguments = len(call.arguments or "") + 16
        result = tool.result
        output = result.content if result is not None else ""
        size = len(output) if isinstance(output, str) else len(text_of(output))
        whole += arguments + size
        short += min(arguments, _ARGUMENT_CHARS) + min(size, _OUTPUT_HEAD + _OUTPUT_TAIL + 100)
    return whole, short


def _tail(
    state: GraphState, chain: list[str], sizes: list[tuple[int, int]], ctx: TierContext
) -> int | None:
    """Where the kept rounds start: at least what auto-compact keeps, up to its share of the
    low-water mark by estimate, at the start of a round; None when there is no such place."""
    policy, nodes = ctx.policy, state.nodes
    room = int(ctx.target * policy.compact_keep_share) * 3  # code runs ~3 characters a token
    keep_messages = policy.compact_keep_messages
    rounds = messages = used = 0
    index = len(chain)
    while index > 1:
        node = nodes[chain[index - 1]]
        size = sizes[index - 1][0]
        enough = (
            messages >= keep_messages
            if keep_messages is not None
            else rounds >= max(1, policy.compact_keep_rounds) and used + size > room
        )
        if enough and index < len(chain) and _starts_round(state, chain, index):
            return index
        index -= 1
        used += size
        messages += 1 + len(state.tools.get(node.id, ()))
        rounds += _role(node) == "assistant"
    return None


def _starts_round(state: GraphState, chain: list[str], index: int) -> bool:
    """Whether the walk's grouping starts a unit at ``chain[index]``: a user message after
    an assistant's, or an assistant message right after another."""
    nodes = state.nodes
    role, before = _role(nodes[chain[index]]), _role(nodes[chain[index - 1]])
    return before == "assistant" and role in ("user", "assistant")


def _rounds(
    state: GraphState, chain: list[str], first: int, end: int
) -> list[tuple[int, int]] | None:
    """The span cut into the walk's rounds (each ends with an assistant message); None
    when anything in it is not a user or assistant message whose tools all have results."""
    nodes, tools = state.nodes, state.tools
    bounds = []
    start = first
    for index in range(first, end):
        node = nodes[chain[index]]
        payload = node.payload
        if type(payload) is not Dialogue or node.meta.get("native_compaction"):
            return None
        if payload.role == "assistant":
            bounds.append((start, index + 1))
            start = index + 1
            if any(nodes[t].result is None for t in tools.get(node.id, ())):
                return None
        elif payload.role != "user":
            return None
    return bounds


def _round(state: GraphState, chain: list[str], bounds: tuple[int, int]) -> RawUnit:
    """One round of the span as the walk groups it (made only for a sampled round)."""
    grouper = Grouper(task_seen=True)
    nodes, tools = state.nodes, state.tools
    index = 0
    for node_id in chain[bounds[0] : bounds[1]]:
        grouper.feed(index, Step(nodes[node_id], "message", 0, False))
        index += 1
        for tool_id in tools.get(node_id, ()):
            grouper.feed(index, Step(nodes[tool_id], "tool", 0, False))
            index += 1
    [unit] = grouper.finish()
    return unit


def _users(
    state: GraphState, chain: list[str], first: int, end: int
) -> Iterator[tuple[ChatMessage, Node | None]]:
    nodes = state.nodes
    for node_id in reversed(chain[first:end]):
        node = nodes[node_id]
        if _role(node) == "user":
            yield dialogue_message(node), node


def _pinned(ctx: TierContext, unit: RawUnit, position: int) -> Unit:
    items = tuple(
        ctx.item(message, node.id if node is not None else None, "full")
        for message, node in unit.entries
    )
    return Unit(items, unit.kind, position, pinned=True)
