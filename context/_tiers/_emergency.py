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
from ._reduce import reduced_call
from ._request import FLOOR_CHARS, latest_request, request_chars
from ._snip import exempt, insert_note, note_unit
from ._tier import Tier, TierContext, TierState

_MIN_CHARS = 64


class EmergencyState(TierState):
    """The last emergency cut, by digest: emergency decides afresh on every render (it
    keeps nothing), and the same cut of the same prompt is not a new decision to record."""

    last: str = ""


def stub_text(back: str, tools: str) -> str:
    """The words of a stub for an elided step (its source says what it is)."""
    return f"[earlier step elided to fit the context{back}{tools}]"


def _stub(unit: Unit, ctx: TierContext) -> Unit:
    names = [item.tool_name for item in unit.items if item.tool_name]
    ids = unit.node_ids
    first, last = (ctx.handle(ids[0]), ctx.handle(ids[-1])) if ids else ("", "")
    back = f'; read_history("{first}", "{last}") returns it' if ids else ""
    tools = f"; it called {', '.join(dict.fromkeys(names))}" if names else ""
    text = stub_text(back, tools)[: ctx.policy.emergency_stub_chars]
    item = ctx.item({"role": "assistant", "content": text}, None, "stub")
    return msgspec.structs.replace(unit, items=(item,), kind="stub")


Piece = tuple[int, int, int]
"""One cuttable text: (unit, item, part), part -1 for the content, k for the k-th tool call's
arguments (a ``Write`` of a whole file in the newest round is as long as any output)."""


def _sizes(item: Item) -> list[tuple[int, int]]:
    """(part, characters) of an item's cuttable texts: content, then each call's arguments."""
    sizes = [(-1, len(text_of(item.message.get("content"))))]
    for k, call in enumerate(item.message.get("tool_calls") or ()):
        function = call.get("function") if isinstance(call, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(arguments, str):
            sizes.append((k, len(arguments)))
    return sizes


def _cut(item: Item, keeps: dict[int, int], ctx: TierContext) -> Item:
    """``item`` with each part in ``keeps`` cut to that many characters, from its uncut text."""
    node = (
        ctx.handle(item.node_id) if item.node_id is not None and item.node_id in ctx.graph else None
    )
    message = item.message.copy()
    if -1 in keeps:
        keep = keeps[-1]
        head = keep * 3 // 5
        text = text_of(item.message.get("content"))
        message["content"] = middle_truncate(
            text, head, keep - head, node
        )  # a layer: no read_output
    calls = item.message.get("tool_calls")
    if calls:
        message["tool_calls"] = [
            reduced_call(call, keeps[k], keeps[k] * 3 // 5, keeps[k] - keeps[k] * 3 // 5, None)
            if k in keeps
            else call
            for k, call in enumerate(calls)
        ]
    return Item(message, ctx.counter.count_message(message), item.node_id, item.tool_name, "cut")


def _is_request(item: Item, request: Item) -> bool:
    return item.node_id == request.node_id and item.message.get("role") == "user"


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

    A text is a message's content or one tool call's arguments (cut inside its JSON strings,
    so the call stays valid). Every cut starts from the uncut text, so its marker counts what
    is really gone; a cut that would not save tokens (the marker costs some) is not applied.
    """
    units = [list(u.items) for u in view.units]
    originals = [list(u.items) for u in view.units]
    shown: dict[Piece, int] = {
        (ui, ii, part): size
        for ui, items in enumerate(originals)
        for ii, item in enumerate(items)
        for part, size in _sizes(item)
    }
    keeps: dict[tuple[int, int], dict[int, int]] = {}
    floors: dict[Piece, int] = {}
    request = latest_request(ctx)
    for ui, items in enumerate(originals):
        task = view.units[ui].kind == "task"
        for ii, item in enumerate(items):
            if not task and (request is None or not _is_request(item, request)):
                continue
            # A task or the request: shown as a restored one would be (head and tail past
            # its share), and cut below that only to its floor, after the others.
            floors[(ui, ii, -1)] = FLOOR_CHARS
            limit = request_chars(ctx, text_of(item.message.get("content")))
            if shown[(ui, ii, -1)] > limit and item.variant == "full":
                shown[(ui, ii, -1)] = limit
                keeps[(ui, ii)] = {-1: limit}
                units[ui][ii] = _cut(item, keeps[(ui, ii)], ctx)
    for _ in range(512):
        total = view.extra_tokens + sum(i.tokens for items in units for i in items)
        if total <= ctx.budget:
            break
        best = max(
            (
                (piece not in floors, size, piece)
                for piece, size in shown.items()
                if size > floors.get(piece, _MIN_CHARS)
            ),
            default=None,
        )
        if best is None:
            if not floors:
                break
            floors = {}  # nothing else can shrink: the request goes below its floor too
            continue
        _, size, (ui, ii, part) = best
        floor = floors.get((ui, ii, part), _MIN_CHARS)
        density = max(1.0, min(4.0, size / max(1, originals[ui][ii].tokens)))
        excess_chars = int((total - ctx.budget) * density) + 16  # its own characters a token
        keep = max(floor, min(size // 2, size - excess_chars))
        shown[(ui, ii, part)] = keep
        wanted = {**keeps.get((ui, ii), {}), part: keep}
        cut = _cut(originals[ui][ii], wanted, ctx)
        if cut.tokens < units[ui][ii].tokens:
            units[ui][ii] = cut
            keeps[(ui, ii)] = wanted
    return view.replace(
        msgspec.structs.replace(u, items=tuple(items))
        for u, items in zip(view.units, units, strict=True)
    )


TIER = Tier("emergency", compact=emergency, state=EmergencyState)
