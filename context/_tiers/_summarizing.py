"""What collapse and auto-compact share: asking the summarizer (once per segment, fail-open),
and making the layer whose replacement the prompt shows.

A summary is computed once: its result is kept in the layer's metadata, and a later layer
over exactly the same nodes (after a rollback, say) reuses it instead of asking again.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
import time
from collections.abc import Sequence
from typing import Any

import msgspec

from graph import ChatMessage, LayerInfo, Redactor, text_of

from .._budget._cut import middle_truncate
from .._budget._names import LayerKind
from .._budget._redaction import summary_redactor
from .._summaries._summary import SummaryRequest, SummaryResult, anchors_from_dict
from .._view import Item, Unit, Variant, View
from ._awaiting import NOT_READY, summary_call
from ._book import LAYER_TOTALS, covered_totals
from ._layers import show_layer
from ._reduce import reduced_call
from ._tier import TierContext

_SHOWN_AS: tuple[Variant, ...] = ("reduced", "offloaded", "cleared", "edit-cleared", "cut")


def segment_key(units: list[Unit] | tuple[str, ...]) -> str:
    """A short, stable key of the nodes a segment covers."""
    ids = units if isinstance(units, tuple) else tuple(n for u in units for n in u.node_ids)
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()[:20]


SUMMARY_TEXT_CHARS = 200_000
"""A longer text reaches a summarizer as its first and last 100k characters: a summary of
a 100 MB output needs what its ends say, and redacting, scanning and splitting it whole
cost seconds and its size again in memory."""


def originals(units: list[Unit], ctx: TierContext) -> tuple[Unit, ...]:
    """The units with every item as stored, not as a tier showed it (a summary must be
    made from what really happened, not from a placeholder), huge texts clipped."""
    restored = []
    for unit in units:
        items = []
        for item in unit.items:
            if item.variant in _SHOWN_AS:
                original = ctx.memoized(item.node_id, "full")
                items.append(_clipped(original if original is not None else item, ctx))
            else:
                items.append(_clipped(item, ctx))
        restored.append(msgspec.structs.replace(unit, items=tuple(items)))
    return tuple(restored)


def _clipped(item: Item, ctx: TierContext) -> Item:
    content = item.message.get("content")
    if not isinstance(content, str) or len(content) <= SUMMARY_TEXT_CHARS:
        return item
    half = SUMMARY_TEXT_CHARS // 2
    ref = None if item.node_id is None else ctx.handle(item.node_id)  # as the prompt names it
    clipped = middle_truncate(content, half, half, ref)
    return msgspec.structs.replace(item, message={**item.message, "content": clipped})


MIN_ITEM_CHARS = 500
"""The least any text of a bounded request keeps (its head and tail), however many
items share the request's room: below that a tool output says nothing."""


def bounded(units: tuple[Unit, ...], ctx: TierContext) -> tuple[Unit, ...]:
    """The units as an LLM summarizer is sent them (C9: a summary request is bounded).

    Every text (a message's content, a long string argument of a call) over
    ``policy.summary_item_chars`` keeps its head and tail, as budget reduction shows an
    output; while the whole is still over ``policy.summary_request_bound`` (a share of the
    budget, at most ``summary_request_tokens``), the bound halves, down to
    ``MIN_ITEM_CHARS``. Units still over it then are sampled (see :func:`sampled`): the
    newest, then an even stride over the older ones, so a request over hundreds of rounds
    stays the size it promises. The summary is of what happened, so the texts are the stored
    ones (``originals``), only shortened; a summarizer ranks identifiers from those locally
    (``SummaryRequest.sources``), which costs no LLM tokens."""
    policy = ctx.policy
    limit = policy.summary_item_chars
    total = policy.summary_request_bound(ctx.budget)
    while True:
        shortened = tuple(_shortened(unit, limit) for unit in units)
        if total is None:
            return shortened
        sizes = [_tokens(unit, ctx) for unit in shortened]
        if sum(sizes) <= total:
            return shortened
        if limit <= MIN_ITEM_CHARS:
            return tuple(shortened[i] for i in sampled(range(len(sizes)), sizes, total))
        limit = max(MIN_ITEM_CHARS, limit // 2)


def sampled(part: range, sizes: list[int], bound: int) -> list[int]:
    """Which of ``part``'s units a request reads (``sizes`` are all units' tokens): all
    when they fit; else the newest within half the bound, then an even stride over the
    older ones within the rest. The newest rounds say where the work stands; the stride
    keeps every stretch of the older ones represented. The newest unit is read even when it
    alone is over the bound: a request never covers nothing."""
    if sum(sizes[i] for i in part) <= bound:
        return list(part)
    chosen: list[int] = []
    room = bound // 2
    index = part.stop - 1
    while index >= part.start and sizes[index] <= room:
        room -= sizes[index]
        chosen.append(index)
        index -= 1
    older = range(part.start, index + 1)
    if older:
        left = bound - bound // 2 + room
        mean = max(1, sum(sizes[i] for i in older) // len(older))
        step = max(1, -(-len(older) * mean // max(1, left)))
        for at in older[::step]:
            if sizes[at] <= left:
                left -= sizes[at]
                chosen.append(at)
    return sorted(chosen) if chosen else [part.stop - 1] if part else []


def _tokens(unit: Unit, ctx: TierContext) -> int:
    return ctx.counter.count_messages(item.message for item in unit.items)


def _shortened(unit: Unit, limit: int) -> Unit:
    items = tuple(_short_item(item, limit) for item in unit.items)
    if all(new is old for new, old in zip(items, unit.items, strict=True)):
        return unit
    return msgspec.structs.replace(unit, items=items)


def _short_item(item: Item, limit: int) -> Item:
    message = item.message
    content = message.get("content")
    changed: dict[str, Any] = {}
    if isinstance(content, str) and len(content) > limit:
        changed["content"] = _short_text(content, limit)
    calls = message.get("tool_calls")
    if calls:
        short_calls = [_short_call(call, limit) for call in calls]
        if any(new is not old for new, old in zip(short_calls, calls, strict=True)):
            changed["tool_calls"] = short_calls
    if not changed:
        return item
    return msgspec.structs.replace(item, message={**message, **changed})


def _short_text(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 3 // 5
    return middle_truncate(text, head, limit - head, None)


def _short_call(call: Any, limit: int) -> Any:
    """A call whose long string arguments keep head and tail (the JSON stays valid)."""
    head = limit * 3 // 5
    return reduced_call(call, limit, head, limit - head, None)


def task_text(ctx: TierContext) -> str | None:
    for unit in ctx.units:
        if unit.kind == "task" and unit.items:
            return text_of(unit.items[0].message.get("content"))
    return None


def system_text(ctx: TierContext) -> str | None:
    for unit in ctx.units:
        if unit.kind == "system" and unit.items:
            return text_of(unit.items[0].message.get("content"))
    return None


def result_of(info: LayerInfo) -> SummaryResult | None:
    """The summary a layer was made from (kept in its metadata)."""
    raw = info.layer.meta.get("summary")
    if not isinstance(raw, dict):
        return None
    return SummaryResult(
        anchors=anchors_from_dict(raw.get("anchors")),
        prose=str(raw.get("prose") or ""),
        identifiers=tuple(raw.get("identifiers") or ()),
        summarizer=str(raw.get("summarizer") or ""),
        concluded=tuple(str(item) for item in raw.get("concluded") or ()),
    )


def summary_meta(result: SummaryResult) -> dict[str, Any]:
    return {
        "anchors": result.anchors.as_dict(),
        "prose": result.prose,
        "identifiers": list(result.identifiers),
        "concluded": list(result.concluded),
        "summarizer": result.summarizer,
        "tokens_in": result.tokens_in,
        "tokens_out": result.tokens_out,
    }


def reusable(
    ctx: TierContext, kind: LayerKind, covers: tuple[str, ...], extra: str
) -> SummaryResult | None:
    """A summary made earlier for exactly these nodes (a rolled-back layer's, say)."""
    if ctx.layers is None:
        return None
    name = getattr(ctx.summarizer, "name", "")
    for info in reversed(ctx.graph.layers()):
        if info.kind != kind or info.covers != covers:
            continue
        if info.layer.meta.get("summary_key", "") != extra:
            continue
        found = result_of(info)
        if found is not None and found.summarizer == name:
            redactor = summary_redactor(ctx.policy, ctx.graph)
            return found if redactor is None else redactor.value(found)
    return None


def summarize(
    ctx: TierContext, request: SummaryRequest, key: str | None = None, *, wait: bool = True
) -> tuple[SummaryResult | None, str | None, float]:
    """Ask the summarizer (or take the summary computed ahead under ``key``); a failure or
    an unusable reply gives (None, why, ms), a summary not ready under ``summary_wait =
    "never"`` (unless ``wait``) (None, ``NOT_READY``, 0)."""
    started = time.perf_counter()
    summarizer = ctx.summarizer
    if summarizer is None:
        return None, "no summarizer configured", 0.0
    asked = _asked(request)
    known = ctx.summaries.get(asked)
    if known is not None:
        return known, None, 0.0
    call = summary_call(ctx, request, key, wait=wait)
    if call is None:
        return None, NOT_READY, 0.0
    try:
        result = call()
    except Exception as error:  # fail-open: the tier falls back and records why
        return None, f"summarizer failed: {error!r}", (time.perf_counter() - started) * 1000
    ms = (time.perf_counter() - started) * 1000
    if not isinstance(result, SummaryResult):
        return None, f"summarizer returned {type(result).__name__}, not a SummaryResult", ms
    if result.anchors.empty and not result.prose.strip():
        return None, "summarizer returned an empty summary", ms
    if not result.summarizer:
        # Name it after who made it: records say so, and reuse matches on it.
        result = msgspec.structs.replace(result, summarizer=str(getattr(summarizer, "name", "")))
    redactor = summary_redactor(ctx.policy, ctx.graph)
    if redactor is not None:  # a summarizer may read more than it was given
        result = redactor.value(result)
    ctx.summaries[asked] = result
    return result, None, ms


def _asked(request: SummaryRequest) -> tuple[object, ...]:
    """What makes two requests the same question (so it is asked once per engine)."""
    previous = request.previous.text() if request.previous is not None else ""
    return (
        request.kind,
        tuple(request.node_ids),
        request.focus,
        request.max_tokens,
        request.identifier_tokens,
        request.conclusion_tokens,
        hashlib.sha256(previous.encode()).hexdigest(),
    )


def request_for(
    ctx: TierContext,
    kind: LayerKind,
    units: list[Unit],
    *,
    max_tokens: int,
    previous: SummaryResult | None = None,
    focus: str | None = None,
) -> SummaryRequest:
    restored = originals(units, ctx)
    redactor = summary_redactor(ctx.policy, ctx.graph)
    nodes = {}
    for unit in restored:
        for node_id in unit.node_ids:
            if node_id in ctx.graph:
                nodes[node_id] = ctx.graph.get(node_id)
    if redactor is not None:  # the nodes too: a failed function's error is read from them
        restored = redactor.value(restored)
        nodes = {node_id: redactor.value(node) for node_id, node in nodes.items()}
        previous = redactor.value(previous)
    sent = bounded(restored, ctx)
    policy = ctx.policy
    # a compaction covers many segments' worth of rounds: identifier_tokens each; either
    # way at most half of the summary (a ranked list beside the anchors, not a bag of words)
    rounds = sum(unit.count for unit in units)
    segments = 1 if kind == "collapse" else max(1, -(-rounds // policy.collapse_max_rounds))
    per_segment = policy.identifier_cap(ctx.nominal_budget or ctx.budget)
    identifiers = min(per_segment * segments, max_tokens // 2)
    # the agent's statements: one bound whatever the span (each is charged as written
    # output), within a third of the summary
    conclusions = min(policy.conclusion_tokens, max_tokens // 3)
    return SummaryRequest(
        kind="segment" if kind == "collapse" else "compact",
        units=sent,
        sources=() if _unchanged(sent, restored) else restored,
        nodes=nodes,
        task=_clean(task_text(ctx), redactor),
        previous=previous,
        focus=focus,
        max_tokens=max_tokens,
        identifier_tokens=identifiers,
        conclusion_tokens=conclusions,
        system=_clean(system_text(ctx), redactor) if policy.summary_shares_prefix else None,
        model=policy.model,
        counter=ctx.counter,
    )


def _unchanged(sent: tuple[Unit, ...], restored: tuple[Unit, ...]) -> bool:
    return len(sent) == len(restored) and all(map(operator.is_, sent, restored))


def _clean(text: str | None, redactor: Redactor | None) -> str | None:
    return text if text is None or redactor is None else redactor.redact(text)


def span(units: list[Unit], ctx: TierContext) -> str:
    """The first and last node ``units`` hold, by handles."""
    ids = [n for unit in units for n in unit.node_ids]
    return f"nodes {ctx.handle(ids[0])} … {ctx.handle(ids[-1])}" if ids else "no nodes"


def make_layer(
    view: View,
    ctx: TierContext,
    kind: LayerKind,
    covered: list[Unit],
    messages: list[ChatMessage],
    result: SummaryResult | None,
    meta: dict[str, Any],
    layer_id: str,
) -> tuple[View, LayerInfo]:
    """Decide on a layer (pending until the engine commits the render) and show it in
    ``view``; ``result`` is our summarizer's (None when the replacement came from
    elsewhere)."""
    assert ctx.layers is not None
    covers = [n for unit in covered for n in unit.node_ids]
    full_meta = meta if result is None else {**meta, "summary": summary_meta(result)}
    full_meta = {**full_meta, LAYER_TOTALS: covered_totals(ctx.graph, covers, ctx.counter)}
    info = ctx.layers.add(kind, covers, messages, full_meta, layer_id=layer_id)
    return show_layer(view, ctx, info, covered), info


def record_layer(
    ctx: TierContext,
    tier: str,
    view: View,
    after: View,
    covered: list[Unit],
    result: SummaryResult | None,
    text: str,
    *,
    started: float,
    ms: float,
    details: dict[str, Any],
) -> None:
    """Record a layer a summary made: what it covered, kept and (``result``: our
    summarizer's) cost to ask for."""
    if result is not None:
        asked = {
            "name": result.summarizer,
            "tokens_in": result.tokens_in,
            "tokens_out": result.tokens_out,
            "ms": round(ms, 3),
        }
        details = {**details, "summarizer": asked}
    ctx.record(
        tier,
        view,
        after,
        started=started,
        summarized=sum(len(unit.items) for unit in covered),
        preserved=len(after.units),
        summary=text,
        anchors=None if result is None else result.anchors.as_dict(),
        details=details,
    )


_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_layer_id(ctx: TierContext, covers: Sequence[str], kind: LayerKind) -> str:
    """A layer's id, derived from what it covers: the model reads it in the layer's
    banner, and a random one tokenized differently run to run, so the same history made
    different decisions (1 or 2 compactions in one scripted run). It has a ULID's shape:
    the time part of the last covered node's id, then 16 characters of a digest of the
    session, the kind, the covered ids and a counter that skips every id this session
    has used (a layer made again after a rollback gets one of its own)."""
    taken = set(ctx.graph.state.layers)
    if ctx.layers is not None:
        taken.update(ctx.layers.overlay)
    last = covers[-1] if covers else ""
    stamp = last[:10] if len(last) == 26 and last.isalnum() else "0" * 10
    for counter in itertools.count():
        digest = hashlib.sha256(
            "\0".join([ctx.graph.session, kind, str(counter), *covers]).encode()
        ).digest()
        layer_id = stamp + "".join(_ALPHABET[byte & 31] for byte in digest[:16])
        if layer_id not in taken and layer_id not in ctx.graph:
            return layer_id
    raise AssertionError("unreachable")  # pragma: no cover
