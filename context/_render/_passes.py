"""The integrity passes (tool pairs, call ids, provider roles) as steps that can resume.

Each pass remembers where it stood after every message, so the next prompt, which is
the last one plus a few messages (by identity), is passed over only past what it shares
with the one before (``_finish.Finisher``). A fresh pass over a whole prompt is what
``_integrity``'s functions run, so there is one implementation of each rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graph import ChatMessage, text_of

from .._prefix import same_prefix

Message = ChatMessage
_NO_CALLS: tuple[Any, ...] = ()


def _shared(old: list[Message], new: list[Message], same: int) -> int:
    """How many leading messages of ``new`` are the very objects of ``old``; the first
    ``same`` are known to be (the pass before kept them), so only the rest is compared."""
    same = min(same, len(old), len(new))
    return same + same_prefix(old[same:], new[same:])


def _resume(marks: list[int], shared: int) -> int:
    """The last mark at or before ``shared`` (marks ascend; 0 is always one)."""
    at = len(marks) - 1
    while marks[at] > shared:
        at -= 1
    return at


def _join(a: Any, b: Any) -> Any:
    if isinstance(a, list) or isinstance(b, list):
        parts_a = a if isinstance(a, list) else [{"type": "text", "text": a or ""}]
        parts_b = b if isinstance(b, list) else [{"type": "text", "text": b or ""}]
        return [*parts_a, *parts_b]
    return "\n\n".join(t for t in (text_of(a), text_of(b)) if t)


@dataclass
class RepairPass:
    """``repair_tool_pairs`` with its state after each clean point (no call open)."""

    inputs: list[Message] = field(default_factory=list)
    fixed: list[Message] = field(default_factory=list)
    origin: list[int] = field(default_factory=list)
    """The input index of each fixed message (-1: a placeholder the repair added)."""
    notes: list[str] = field(default_factory=list)
    marks: list[int] = field(default_factory=lambda: [0])
    sizes: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)])
    carried: int = 0
    """How many leading ``fixed`` messages the last run kept from the one before."""

    def run(self, messages: list[Message], same: int = 0) -> None:
        at = _resume(self.marks, _shared(self.inputs, messages, same))
        start, (kept, noted) = self.marks[at], self.sizes[at]
        self.carried = kept
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
class UniquePass:
    """``unique_call_ids`` with its state after each message that renames nothing."""

    inputs: list[Message] = field(default_factory=list)
    fixed: list[Message] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    marks: list[int] = field(default_factory=lambda: [0])
    sizes: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)])
    carried: int = 0
    """How many leading ``fixed`` messages the last run kept from the one before."""

    def run(self, messages: list[Message], same: int = 0) -> None:
        at = _resume(self.marks, _shared(self.inputs, messages, same))
        start, (noted, known) = self.marks[at], self.sizes[at]
        self.carried = start
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
class RolesPass:
    """``grouped_roles`` with its state before each message that starts a result of its
    own (what came before it is final then; a later run that merges another message there
    into it drops that mark)."""

    inputs: list[Message] = field(default_factory=list)
    result: list[Message] = field(default_factory=list)
    groups: list[list[int]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    marks: list[int] = field(default_factory=lambda: [0])
    sizes: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)])

    def run(
        self, messages: list[Message], same: int = 0
    ) -> tuple[list[Message], list[str], list[list[int]]]:
        at = _resume(self.marks, _shared(self.inputs, messages, same))
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
