"""The last step of a render, resumed: integrity repairs and sources past what is unchanged.

A render's last step (``Cascade.finish``) repairs the prompt's integrity (pairs, call ids,
provider roles) and names each message's source, passes over every message. A live agent's
next prompt is its last one plus a few messages, and the engine hands back the very message
objects of the last render for what did not change (it never changes a message it made),
so each pass here remembers where it stood after every message and starts again from the
last point the new prompt shares with the one before, by identity. The passes are the
functions of ``_integrity`` and ``_sources`` cut into steps, so what they return is what a
pass over the whole prompt returns (``test_context_finish`` drives both).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from graph import ChatMessage

from .._store._source import MessageSource
from .._tiers._request import latest_request
from .._tiers._tier import TierContext
from .._view import Item, Unit, View
from ._integrity import _join
from ._sources import _last_task, _source, added, merged

Message = ChatMessage
KEPT_FRAMES = 8
"""Frames whose last passes are kept (a function's frame is rendered while it runs)."""
_NO_CALLS: tuple[Any, ...] = ()


def _shared(old: Sequence[object], new: Sequence[object]) -> int:
    """How many leading entries are the same objects."""
    count = 0
    for a, b in zip(old, new, strict=False):
        if a is not b:
            break
        count += 1
    return count


def _resume(marks: list[int], shared: int) -> int:
    """The last mark at or before ``shared`` (marks ascend; 0 is always one)."""
    at = len(marks) - 1
    while marks[at] > shared:
        at -= 1
    return at


@dataclass
class _Repair:
    """``repair_tool_pairs`` with its state after each clean point (no call open)."""

    inputs: list[Message] = field(default_factory=list)
    fixed: list[Message] = field(default_factory=list)
    origin: list[int] = field(default_factory=list)
    """The input index of each fixed message (-1: a placeholder the repair added)."""
    notes: list[str] = field(default_factory=list)
    marks: list[int] = field(default_factory=lambda: [0])
    sizes: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)])

    def run(self, messages: list[Message]) -> None:
        at = _resume(self.marks, _shared(self.inputs, messages))
        start, (kept, noted) = self.marks[at], self.sizes[at]
        del self.marks[at + 1 :], self.sizes[at + 1 :]
        fixed, notes, shown = self.fixed[:kept], self.notes[:noted], self.origin[:kept]
        marks, sizes = self.marks, self.sizes
        open_calls: list[str] = []
        for index in range(start, len(messages)):
            message = messages[index]
            role = message.get("role")
            if role == "tool":
                call_id = message.get("tool_call_id")
                if call_id in open_calls:
                    open_calls.remove(call_id)
                    fixed.append(message)
                    shown.append(index)
                else:
                    notes.append(f"dropped orphaned result {call_id!r}")
                continue
            if open_calls:
                _close(open_calls, fixed, shown, notes)
            if index > start:
                marks.append(index)
                sizes.append((len(fixed), len(notes)))
            fixed.append(message)
            shown.append(index)
            if role == "assistant":
                open_calls.extend(c.get("id") for c in message.get("tool_calls") or _NO_CALLS)
        _close(open_calls, fixed, shown, notes)
        self.inputs, self.fixed, self.notes, self.origin = messages, fixed, notes, shown


def _close(open_calls: list[str], fixed: list[Message], shown: list[int], notes: list[str]) -> None:
    for call_id in open_calls:
        fixed.append(
            {"role": "tool", "tool_call_id": call_id, "content": "[no result was recorded]"}
        )
        shown.append(-1)
        notes.append(f"added a placeholder result for call {call_id!r}")
    open_calls.clear()


@dataclass
class _Unique:
    """``unique_call_ids`` with its state after each message that renames nothing."""

    inputs: list[Message] = field(default_factory=list)
    fixed: list[Message] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    marks: list[int] = field(default_factory=lambda: [0])
    sizes: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)])

    def run(self, messages: list[Message]) -> None:
        at = _resume(self.marks, _shared(self.inputs, messages))
        start, (noted, known) = self.marks[at], self.sizes[at]
        del self.marks[at + 1 :], self.sizes[at + 1 :]
        fixed, notes = self.fixed[:start], self.notes[:noted]
        order = self.seen[:known]
        seen = set(order)
        renamed: dict[str, str] = {}
        for index in range(start, len(messages)):
            message = messages[index]
            if not renamed and index > start:
                self.marks.append(index)
                self.sizes.append((len(notes), len(order)))
            calls = message.get("tool_calls")
            if message.get("role") == "assistant" and calls:
                renamed = {}
                new_calls = []
                for call in calls:
                    call_id = call.get("id")
                    if call_id in seen:
                        n = 2
                        while f"{call_id}~{n}" in seen:
                            n += 1
                        renamed[call_id] = f"{call_id}~{n}"
                        notes.append(f"renamed a repeated call id {call_id!r}")
                        call = {**call, "id": renamed[call_id]}
                    seen.add(call["id"])
                    order.append(call["id"])
                    new_calls.append(call)
                fixed.append({**message, "tool_calls": new_calls} if renamed else message)
                continue
            if message.get("role") == "tool" and message.get("tool_call_id") in renamed:
                message = {**message, "tool_call_id": renamed[message["tool_call_id"]]}
            fixed.append(message)
        self.inputs, self.fixed, self.notes, self.seen = messages, fixed, notes, order


@dataclass
class _Roles:
    """``grouped_roles`` with its state before each message that starts a result of its
    own (what came before it is final then; a later run that merges another message there
    into it drops that mark)."""

    inputs: list[Message] = field(default_factory=list)
    result: list[Message] = field(default_factory=list)
    groups: list[list[int]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    marks: list[int] = field(default_factory=lambda: [0])
    sizes: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)])

    def run(self, messages: list[Message]) -> tuple[list[Message], list[str], list[list[int]]]:
        at = _resume(self.marks, _shared(self.inputs, messages))
        start, (size, noted) = self.marks[at], self.sizes[at]
        del self.marks[at + 1 :], self.sizes[at + 1 :]
        result, notes = self.result[:size], self.notes[:noted]
        groups = [list(group) for group in self.groups[:size]]
        for index in range(start, len(messages)):
            message = messages[index]
            previous = result[-1] if result else None
            role = message.get("role")
            if (
                previous is not None
                and role in ("user", "assistant")
                and previous.get("role") == role
                and not previous.get("tool_calls")
            ):
                joined: ChatMessage = {
                    **previous,
                    "content": _join(previous.get("content"), message.get("content")),
                }
                if message.get("tool_calls"):
                    joined["tool_calls"] = message["tool_calls"]
                result[-1] = joined
                groups[-1].append(index)
                notes.append(f"merged consecutive {role} messages")
                if index == start and start:  # its mark held the entry this one changed
                    del self.marks[-1], self.sizes[-1]
                continue
            if index > start:
                self.marks.append(index)
                self.sizes.append((len(result), len(notes)))
            result.append(message)
            groups.append([index])
        self.inputs, self.result, self.groups, self.notes = messages, result, groups, notes
        result, groups, notes = list(result), list(groups), list(notes)
        first = next((i for i, m in enumerate(result) if m.get("role") != "system"), None)
        if first is not None and result[first].get("role") != "user":
            result.insert(first, {"role": "user", "content": "(continuing the conversation)"})
            groups.insert(first, [])
            notes.append("inserted a user turn before the first assistant message")
        return result, notes, groups


@dataclass
class _Scan:
    """One frame's passes, as the last finish left them."""

    repair: _Repair = field(default_factory=_Repair)
    unique: _Unique = field(default_factory=_Unique)
    roles: _Roles = field(default_factory=_Roles)


class Finisher:
    """The integrity repairs and sources of each frame's prompts, resumed where the next
    prompt starts as the last one did. Owned by a cascade (so by one engine, used under its
    lock); :meth:`clear` forgets it all."""

    def __init__(self) -> None:
        self._scans: dict[str | None, _Scan] = {}
        self._units: dict[int, tuple[Unit, list[MessageSource], frozenset[str | None]]] = {}
        """Each unit's sources when it holds neither a layer, nor the current request,
        nor is the task shown as the request: they name no render and depend on nothing
        else, so they hold while the unit is the same object."""
        self._items: dict[int, tuple[Item, str, MessageSource]] = {}
        """Each item's source, in a unit of that kind, with no layer, not the current
        request (for units made anew around items that did not change)."""

    def clear(self) -> None:
        self._scans.clear()
        self._units.clear()
        self._items.clear()

    def finish(
        self,
        view: View,
        ctx: TierContext,
        merge_roles: bool,
        messages: list[Message] | None = None,
    ) -> tuple[list[Message], list[str], list[MessageSource]] | None:
        """The repaired messages, what the repairs did, and each one's source (its
        ``render`` left empty: the caller names the render); None when a message object
        is shown twice (a source is then looked up by object: the whole pass does it)."""
        messages = view.messages if messages is None else messages
        if len(set(map(id, messages))) != len(messages):
            return None
        shown = self._sources(view, ctx)
        scan = self._scans.pop(ctx.frame, None) or _Scan()
        self._scans[ctx.frame] = scan  # the newest last: the oldest frames are forgotten
        while len(self._scans) > KEPT_FRAMES:
            del self._scans[next(iter(self._scans))]
        scan.repair.run(messages)
        notes = list(scan.repair.notes)
        scan.unique.run(scan.repair.fixed)
        fixed = scan.unique.fixed
        placeholder = added("")
        sources = [shown[i] if i >= 0 else placeholder for i in scan.repair.origin]
        notes += scan.unique.notes
        if merge_roles:
            fixed, role_notes, groups = scan.roles.run(fixed)
            sources = [merged(sources, group, "") for group in groups]
            notes += role_notes
        return list(fixed), notes, list(sources)

    def _sources(self, view: View, ctx: TierContext) -> list[MessageSource]:
        """``view_sources`` (with no render named): each unit's kept while it is the same
        object, else each item's while it is, in a unit of the same kind (tiers make new
        units of items they did not change); a unit with a layer, the task shown as the
        request and the current request are made again."""
        request = latest_request(ctx)
        current = None if request is None else request.node_id
        task = _last_task(view) if current is None else None
        found: list[MessageSource] = []
        units: dict[int, tuple[Unit, list[MessageSource], frozenset[str | None]]] = {}
        items: dict[int, tuple[Item, str, MessageSource]] = {}
        known, known_items = self._units, self._items
        for unit in view.units:
            plain = unit is not task and unit.layer is None
            kept = known.get(id(unit))
            if kept is not None and kept[0] is unit and plain and current not in kept[2]:
                sources = kept[1]
                units[id(unit)] = kept
                found += sources
                continue
            if not plain:
                found += [
                    _source(item, unit, ctx, "", current, unit is task) for item in unit.items
                ]
                continue
            sources = []
            for item in unit.items:
                if item.node_id == current:
                    sources.append(_source(item, unit, ctx, "", current, False))
                    continue
                hit = known_items.get(id(item))
                if hit is None or hit[0] is not item or hit[1] != unit.kind:
                    hit = (item, unit.kind, _source(item, unit, ctx, "", current, False))
                items[id(item)] = hit
                sources.append(hit[2])
            ids = frozenset(item.node_id for item in unit.items)
            if current not in ids:
                units[id(unit)] = (unit, sources, ids)
            found += sources
        self._units, self._items = units, items
        return found
