"""The first render of a long history: one compaction of its backlog, not a cascade over it.

A session imported from a trace, or resumed from a database another program wrote, meets
its first render with no tier state. The cascade would tokenize every node, decide every
tier over the whole history and make a collapse per segment: 3,300 summaries for 100k nodes,
each one a summarizer call. Instead, that render keeps the newest rounds that fit the
compaction's share of the low-water mark and makes one compaction layer of everything
between the pinned prefix and them, before any unit under it is built: those units stand as
placeholders, as under a layout checkpoint, and the checkpoint is saved with the render, so
a fresh engine never walks the span again. The span is found on the bare conversation chain
(:mod:`context._render._backlog_chain`) or, when that cannot plan it, on the full walk
(:mod:`context._render._backlog_walk`); this module makes the layer. From then on the
cascade works as usual: the next auto-compaction merges the layer incrementally, and rolling
it back gives the history back to the other tiers (the backlog is never made again for a
session that has layers).

The summary is bounded whatever the history's size: the span is cut into at most
``MAX_REQUESTS`` chunks, each read as a sample of at most ``backlog_request_tokens`` (the
newest units of the chunk first, then an even stride over the rest, long texts clipped),
and each request builds on the previous summary as an incremental compaction does. An LLM
summarizer gets a few bounded calls, never one huge one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import msgspec

from graph import HANDLE_KEY, ChatMessage, LayerInfo, Node, ToolCall, node_handle, text_of

from .._budget._cut import middle_truncate
from .._summaries._summary import SummaryResult
from .._tiers._compact import compaction_text
from .._tiers._summarizing import new_layer_id, request_for, sampled, summarize, summary_meta
from .._tiers._tier import TierContext
from .._view import Item, RawUnit, Unit, View

MIN_UNITS = 256
"""A shorter walk goes through the cascade as usual (its first render is cheap anyway)."""
MAX_REQUESTS = 8
"""Summary requests a backlog takes at most (each bounded, each building on the last)."""
_TEXT_CHARS = 2_000
_OUTPUT_HEAD, _OUTPUT_TAIL = 600, 200
_ARGUMENT_CHARS = 2_000


def estimate(unit: RawUnit) -> tuple[int, int]:
    """Cheap token estimates of a raw unit (characters / 4, no tokenizer): as it is, and as
    a summary request reads it (long texts clipped). Enough to tell a history many budgets
    long from one that is not, and to cut and sample it."""
    chars = clipped = 0
    for message, _ in unit.entries:
        whole, short = _message_chars(message)
        chars += whole
        clipped += short
    overhead = 4 * len(unit.entries)
    return chars // 4 + overhead, clipped // 4 + overhead


def _message_chars(message: ChatMessage) -> tuple[int, int]:
    content = message.get("content")
    length = len(content) if isinstance(content, str) else len(text_of(content)) if content else 0
    limit = _OUTPUT_HEAD + _OUTPUT_TAIL if message.get("role") == "tool" else _TEXT_CHARS
    whole, short = length, min(length, limit + 100)
    for call in message.get("tool_calls") or ():
        arguments = len(str((call.get("function") or {}).get("arguments") or "")) + 16
        whole += arguments
        short += min(arguments, _ARGUMENT_CHARS)
    return whole, short


class Span(NamedTuple):
    """What a backlog covers, however it was found: its rounds' estimates (whole, and as
    a request reads them), each round as a raw unit on demand (only sampled ones are made),
    the node ids, its user messages newest first, and its functions worth inspecting."""

    sizes: list[int]
    digest: list[int]
    round: Callable[[int], RawUnit]
    covers: tuple[str, ...]
    users: Iterable[tuple[ChatMessage, Node | None]]
    inspect: list[str]


def backlog_layer(ctx: TierContext, span: Span, started: float) -> LayerInfo | None:
    """Summarize ``span`` in bounded requests and decide its compaction layer (pending until
    the render commits); None, recorded, when the summarizer failed or it would not pay."""
    policy = ctx.policy
    assert ctx.layers is not None
    ctx.tier = "compact"
    result, asked, error = _summary(ctx, span)
    estimated = sum(span.sizes)
    if result is None:
        before = View((), estimated)
        ctx.act("compact", f"could not summarize the backlog: {error}", before, before, error=error)
        ctx.record("compact", before, before, started=started, error=error)
        return None
    rounds, covers = len(span.sizes), span.covers
    layer_id = new_layer_id(ctx, covers, "compact")
    handle = ctx.layers.next_handle()
    text = compaction_text(
        handle,
        rounds,
        f"nodes {ctx.handle(covers[0])} … {ctx.handle(covers[-1])}",
        result,
        policy,
        offloaded=[],
        inspect=span.inspect,
    )
    messages: list[ChatMessage] = [
        *_recent_users(span.users, ctx),
        {"role": "user", "content": text},
    ]
    tokens = ctx.counter.count_messages(messages)
    if tokens >= estimated * (1 - policy.payoff_share):
        return None
    meta = {
        "reason": "backlog",
        "rounds": rounds,
        "focus": None,
        "pinned": True,
        "summary_key": "",
        "summary": summary_meta(result),
        "requests": len(asked),
        HANDLE_KEY: handle,
    }
    info = ctx.layers.add("compact", list(covers), messages, meta, layer_id=layer_id)
    before, after = View((), estimated), View((), tokens)
    what = f"compacted the backlog of {rounds} round(s) into layer {info.id}"
    ctx.act("compact", what, before, after)
    record = ctx.record(
        "compact",
        before,
        after,
        started=started,
        summarized=len(covers),
        summary=text,
        anchors=result.anchors.as_dict(),
        details={
            "layer": info.id,
            "reason": "backlog",
            "incremental": False,
            "estimated": True,
            "requests": asked,
            "summarizer": {
                "name": result.summarizer,
                "tokens_in": sum(a["tokens_in"] for a in asked),
                "tokens_out": sum(a["tokens_out"] for a in asked),
                "ms": round(sum(a["ms"] for a in asked), 3),
            },
        },
    )
    ctx.records[-1] = msgspec.structs.replace(
        record, messages_before=len(covers), messages_after=len(messages)
    )
    return info


def _chunks(sizes: list[int], bound: int) -> list[range]:
    """At most ``MAX_REQUESTS`` adjacent parts of about equal estimated size."""
    total = sum(sizes)
    count = max(1, min(MAX_REQUESTS, -(-total // max(1, bound)), len(sizes)))
    found: list[range] = []
    start, acc, cut = 0, 0, total / count
    for index, size in enumerate(sizes):
        acc += size
        if acc >= cut * (len(found) + 1) and len(found) < count - 1:
            found.append(range(start, index + 1))
            start = index + 1
    found.append(range(start, len(sizes)))
    return [part for part in found if len(part)]


def _summary(
    ctx: TierContext, span: Span
) -> tuple[SummaryResult | None, list[dict[str, Any]], str | None]:
    """The backlog's summary: one bounded request per chunk, each over the last result."""
    policy = ctx.policy
    bound = policy.backlog_request_tokens
    previous: SummaryResult | None = None
    asked: list[dict[str, Any]] = []
    max_tokens = policy.compact_summary_bound(sum(span.sizes), ctx.target)
    for part in _chunks(span.sizes, bound):
        units = [_request_unit(_clip(span.round(i)), i) for i in sampled(part, span.digest, bound)]
        request = request_for(ctx, "compact", units, max_tokens=max_tokens, previous=previous)
        result, error, ms = summarize(ctx, request)
        if result is None:
            return None, asked, error
        asked.append(
            {
                "units": len(units),
                "of": len(part),
                "tokens_in": result.tokens_in,
                "tokens_out": result.tokens_out,
                "ms": round(ms, 3),
            }
        )
        previous = result
    return previous, asked, None


def _clip(unit: RawUnit) -> RawUnit:
    """The unit with long texts cut to their ends (what a summary of a backlog reads)."""
    entries = []
    for message, node in unit.entries:
        content = message.get("content")
        node_id = node_handle(node) if node is not None else None
        if isinstance(content, str):
            head, tail = (
                (_OUTPUT_HEAD, _OUTPUT_TAIL)
                if message.get("role") == "tool"
                else (_TEXT_CHARS * 3 // 4, _TEXT_CHARS // 4)
            )
            if len(content) > head + tail:
                message = {
                    **message,
                    "content": middle_truncate(content, head, tail, node_id),
                }
        calls = message.get("tool_calls")
        if calls:
            message = {**message, "tool_calls": [_short_call(c) for c in calls]}
        entries.append((message, node))
    return msgspec.structs.replace(unit, entries=tuple(entries))


def _short_call(call: ToolCall) -> ToolCall:
    arguments = str(call["function"].get("arguments") or "")
    if len(arguments) <= _ARGUMENT_CHARS:
        return call
    short = arguments[: _ARGUMENT_CHARS - 40] + f" … ({len(arguments):,} characters)"
    return {**call, "function": {**call["function"], "arguments": short}}


def _request_unit(unit: RawUnit, position: int) -> Unit:
    """A unit for a summary request, its counts estimated (a summarizer reads the text)."""
    items = tuple(
        Item(
            message,
            _message_chars(message)[0] // 4 + 4,
            node.id if node is not None else None,
            _tool_name(node),
        )
        for message, node in unit.entries
    )
    return Unit(items, unit.kind, position, node_ids=unit_ids(unit))


def _tool_name(node: Node | None) -> str | None:
    if node is None or node.kind != "tool":
        return None
    name: str | None = node.payload.name
    return name


def _recent_users(
    users: Iterable[tuple[ChatMessage, Node | None]], ctx: TierContext
) -> list[ChatMessage]:
    """The newest user messages of the span (``users``: its messages, newest first),
    verbatim, within ``compact_user_tokens`` (counted exactly: only these are tokenized)."""
    room = ctx.policy.compact_user_tokens
    candidates, likely = [], 0
    for message, node in users:
        if message.get("role") != "user":
            continue
        if likely > 2 * room:
            break
        likely += _message_chars(message)[0] // 4 + 4
        candidates.append((message, node))
    ctx.cache.prefetch(f"{node.id}:full" for _, node in candidates if node is not None)
    chosen: list[ChatMessage] = []
    for message, node in candidates:
        tokens = ctx.item(message, node.id if node is not None else None, "full").tokens
        if tokens > room:
            break
        room -= tokens
        chosen.append(message)
    return list(reversed(chosen))


def unit_ids(unit: RawUnit) -> tuple[str, ...]:
    """The node ids of a raw unit, in order, each once (what its built unit names)."""
    return tuple(dict.fromkeys(node.id for _, node in unit.entries if node is not None))
