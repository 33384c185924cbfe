"""Emergency (last resort, no LLM): make the prompt fit whenever its core can.

Four steps, each only if the prompt still does not fit: older rounds inside running
subtrees become one-line stubs; every unit but the pinned ones and the newest goes, with a
note; the longest remaining texts are cut in the middle with a marker; last, compactions
(pinned layers) go too, so only the system prompt, the tasks and the newest unit remain.
"""

from __future__ import annotations

import hashlib
import time

import msgspec

from graph import text_of

from .._budget._cut import middle_truncate
from .._view import Item, Unit, View
from ._request import request_chars
from ._snip import exempt, insert_note, note_unit
from ._tier import Tier, TierContext, TierState

_MIN_CHARS = 64


class EmergencyState(TierState):
    """The last emergency cut, by digest: emergency decides afresh on every render (it
    keeps nothing), and the same cut of the same prompt is not a new decision to record."""

    last: str = ""


def _stub(unit: Unit, ctx: TierContext) -> Unit:
    names = [item.tool_name for item in unit.items if item.tool_name]
    ids = unit.node_ids
    back = f'; read_history("{ids[0]}", "{ids[-1]}") returns it' if ids else ""
    tools = f"; it called {', '.join(dict.fromkeys(names))}" if names else ""
    text = f"[earlier step elided to fit the context{back}{tools}]"
    text = text[: ctx.policy.emergency_stub_chars]
    item = ctx.item({"role": "assistant", "content": text}, None, "stub")
    return msgspec.structs.replace(unit, items=(item,), kind="stub")


def _cut(item: Item, keep_chars: int, ctx: TierContext) -> Item:
    text = text_of(item.message.get("content"))
    head = keep_chars * 3 // 5
    node = item.node_id if item.node_id is not None and item.node_id in ctx.graph else None
    cut = middle_truncate(text, head, keep_chars - head, node)  # a layer's text: no read_output
    message = {**item.message, "content": cut}
    if item.message.get("tool_calls"):
        message["tool_calls"] = item.message["tool_calls"]
    return Item(message, ctx.counter.count_message(message), item.node_id, item.tool_name, "cut")


def emergency(view: View, ctx: TierContext) -> View:
    started = time.perf_counter()
    before = view
    steps: list[str] = []
    if not view.units:
        return view
    last = view.units[-1]
    if view.tokens > ctx.budget:
        units = [
            _stub(u, ctx)
            if u.running and not u.pinned and u is not last and u.kind != "stub"
            else u
            for u in view.units
        ]
        if any(new is not old for new, old in zip(units, view.units, strict=True)):
            view = view.replace(units)
            steps.append("stubbed running rounds")
    if view.tokens > ctx.budget:
        last = view.units[-1]
        dropped = [
            u for u in view.units if (u.kind == "stub" or not exempt(u, last)) and u is not last
        ]
        if dropped:
            view = _drop(view, dropped, ctx)
            steps.append(f"dropped {len(dropped)} unit(s)")
    if view.tokens > ctx.budget:
        view = _cut_longest(view, ctx)
        steps.append("cut long texts")
    if view.tokens > ctx.budget:
        # A compaction is pinned against the other tiers, not against the core fitting.
        last = view.units[-1]
        layers = [u for u in view.units if u.kind == "layer" and u is not last]
        if layers:
            view = _drop(view, layers, ctx)
            steps.append(f"dropped {len(layers)} compaction(s)")
    if view is not before:
        ctx.act("emergency", "; ".join(steps), before, view)
        state = ctx.state(EmergencyState)
        digest = _digest(steps, view)
        if digest != state.last:
            state.last = digest
            ctx.record("emergency", before, view, started=started, details={"steps": steps})
    return view


def _digest(steps: list[str], view: View) -> str:
    shown = [(u.kind, u.node_ids, tuple(i.variant for i in u.items)) for u in view.units]
    return hashlib.sha256(msgspec.json.encode([steps, shown])).hexdigest()[:20]


def _drop(view: View, dropped: list[Unit], ctx: TierContext) -> View:
    """``view`` without ``dropped``; one note stands for them and any earlier notes."""
    notes = [u for u in view.units if u.kind == "note"]
    gone = {id(u) for u in (*dropped, *notes)}
    kept = [u for u in view.units if id(u) not in gone]
    merged = sorted([*notes, *dropped], key=lambda u: u.position)
    return view.replace(insert_note(kept, note_unit(ctx, merged)))


def _cut_longest(view: View, ctx: TierContext) -> View:
    """Cut the longest texts (halving, longest first) until the view fits or cannot shrink.

    Tasks and the restored request first show head and tail within what a request may
    show (the same bytes every time), and are cut further only once nothing else can be:
    what the model is asked to do is the last text to go. Every cut starts from the uncut
    text, so its marker counts what is really gone; a cut that would not save tokens (the
    marker costs some) is not applied.
    """
    units = [list(u.items) for u in view.units]
    originals = [list(u.items) for u in view.units]
    shown: dict[tuple[int, int], int] = {}
    tasks = {ui for ui, unit in enumerate(view.units) if unit.kind == "task"}
    for ui in tasks:
        for ii, item in enumerate(units[ui]):
            text = text_of(item.message.get("content"))
            limit = request_chars(ctx, text)
            if len(text) > limit:
                shown[(ui, ii)] = limit
                units[ui][ii] = _cut(item, limit, ctx)
    for last in (False, True):
        for _ in range(256):
            total = view.extra_tokens + sum(i.tokens for items in units for i in items)
            if total <= ctx.budget:
                break
            best = None
            for ui, items in enumerate(originals):
                if ui in tasks and not last:
                    continue
                for ii, item in enumerate(items):
                    size = shown.get((ui, ii), len(text_of(item.message.get("content"))))
                    if size > _MIN_CHARS and (best is None or size > best[0]):
                        best = (size, ui, ii)
            if best is None:
                break
            size, ui, ii = best
            excess_chars = (total - ctx.budget) * 4 + 16
            keep = max(_MIN_CHARS, min(size // 2, size - excess_chars))
            shown[(ui, ii)] = keep
            cut = _cut(originals[ui][ii], keep, ctx)
            if cut.tokens < units[ui][ii].tokens:
                units[ui][ii] = cut
    return view.replace(
        msgspec.structs.replace(u, items=tuple(items))
        for u, items in zip(view.units, units, strict=True)
    )


TIER = Tier("emergency", compact=emergency, state=EmergencyState)
