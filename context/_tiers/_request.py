"""The latest user request: always in the prompt, verbatim, where it reads as the request.

The task (a frame's first user message) is pinned; a later user message belongs to the
round it starts, which snip, collapse and compaction may take like any other. The request
being worked on must never go that way: when the cascade has taken its round, the message
comes back as its own unit, after every note and summary (what they stand for is older
than what the model is asked to do next), and the rounds kept verbatim follow it. Making
room for it is the cascade's job, done once more with the message counted.
"""

from __future__ import annotations

from graph import Dialogue, dialogue_message, text_of

from .._budget._cut import middle_truncate
from .._view import Item, Unit, UnitKind, View
from ._tier import TierContext

_SHARE = 0.25
"""Share of the budget a restored request may take; a longer one shows head and tail."""
_MIN_CHARS = 2_000
FLOOR_CHARS = 400
"""What emergency leaves of the request at the least (head and tail): other texts are cut
before it goes below."""

_AFTER: tuple[UnitKind, ...] = ("system", "task", "note", "layer", "stub")
"""Kinds a restored request goes after: the pinned prefix and what stands for removed
rounds."""


def latest_request(ctx: TierContext) -> Item | None:
    """The newest user message of the walk after its task, as shown in full (None when the
    task is the newest). The scan goes back from the end and is kept for the next render:
    an append costs the new units only."""
    units = ctx.units
    cache = ctx.scratch.setdefault("\0request", {})
    start = cache.get("upto", 0)
    known, at = cache.get("found"), cache.get("at")
    if start > len(units) or cache.get("walks") != ctx.walks:
        start = 0
    elif ctx.first_changed < start:  # the units rebuilt are scanned again
        start = max(ctx.first_changed, 0)
        if at is not None and at >= start:
            start = 0  # what the last scan found was rebuilt: look at everything again
    if start == 0:
        known, at = None, None
    where = _scan(units, start, ctx)
    if where is not None:
        at, known = where
    cache.update(upto=len(units), walks=ctx.walks, found=known, at=at)
    if known is None:
        return None
    return _shown_as(known, ctx)


def top_request(ctx: TierContext) -> Item | None:
    """In a function's frame, the newest user message of the top level: what the person
    asked, which the function works on as much as on its own task (None at the top level,
    where it is :func:`latest_request`)."""
    if ctx.frame is None:
        return None
    tasks = [i for i, unit in enumerate(ctx.units) if unit.kind == "task"]
    if len(tasks) < 2:
        return None
    where = _scan(ctx.units[tasks[0] : tasks[1]], 0, ctx)
    return None if where is None or where[1] is None else _shown_as(where[1], ctx)


def _shown_as(known: str, ctx: TierContext) -> Item:
    """A request as the prompt shows it: whole, or head and tail when it is long."""
    node = ctx.graph.get(known)
    message = dialogue_message(node)
    text = text_of(message.get("content"))
    limit = request_chars(ctx, text)
    if len(text) > limit:  # head and tail; the marker says where to read the rest
        head = limit * 3 // 5
        cut = middle_truncate(text, head, limit - head, ctx.handle(node.id))
        return ctx.item({**message, "content": cut}, node.id, "cut")
    return ctx.item(message, node.id, "full")


def request_chars(ctx: TierContext, text: str) -> int:
    """Characters a request or task ``text`` shows at most; a longer one shows head and
    tail, which take at most ``_SHARE`` of the budget (so a request beside the floor fits
    even under a small one). It depends on the text and the budget only: the same bytes
    on every render."""
    budget = ctx.nominal_budget or ctx.budget
    limit = max(_MIN_CHARS, int(budget * _SHARE * 4))  # ~4 characters a token
    if len(text) <= limit:
        return limit
    head = limit * 3 // 5
    shown = ctx.counter.count_text(text[:head] + text[len(text) - (limit - head) :])
    room = int(budget * _SHARE)
    return limit if shown <= room else max(1, limit * room // shown)


def _scan(units: list[Unit], start: int, ctx: TierContext) -> tuple[int, str | None] | None:
    """Back from the end to ``start``: the index of the unit of the newest user message (and
    its node id) or of the task (None as the id); None when neither is there."""
    for index in range(len(units) - 1, start - 1, -1):
        unit = units[index]
        if unit.kind == "task":
            return index, None
        if unit.kind != "round":
            continue
        for node_id in reversed(unit.node_ids):
            if node_id not in ctx.graph:
                continue
            payload = ctx.graph.get(node_id).payload
            if isinstance(payload, Dialogue) and payload.role == "user":
                return index, node_id
    return None


def shown(view: View, request: Item) -> bool:
    """Whether the request is in the view as itself (in full, or cut by emergency).
    Looked for from the end, where it usually is."""
    return any(
        item.node_id == request.node_id and item.message.get("role") == "user"
        for unit in reversed(view.units)
        for item in unit.items
    )


def with_request(view: View, request: Item, *, outer: bool = False) -> View:
    """``view`` with the request as its own pinned unit, after the last unit that stands
    for removed rounds (or the pinned prefix); ``outer`` (the person's request, in a
    function's frame): before the outermost function's task, so the frame's own
    instruction stays the newest one it reads."""
    units = list(view.units)
    tasks = [i for i, u in enumerate(units) if u.kind == "task"]
    if outer and len(tasks) > 1:
        at = tasks[1]
    else:
        at = max((i + 1 for i, u in enumerate(units) if u.kind in _AFTER), default=0)
    position = units[at - 1].position if at else 0
    unit = Unit((request,), "task", position, pinned=True, node_ids=(str(request.node_id),))
    return view.replace([*units[:at], unit, *units[at:]])
