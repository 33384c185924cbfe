"""Framework objects kept by identity across calls (``KeptEntries``): whatever a framework
does to its history between two requests (messages appended, dropped, moved, replaced, or
edited in place, a nested value included), the entries are those a fresh conversion of
every object gives, and an object that did not change keeps its very entries."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from openprogram.integrations import Entry

# internal: KeptEntries is the adapters' machinery, not a public name; its shortcuts (the
# shared start found in C, the states compared as one list) are checked here directly.
from openprogram.integrations._kept import KeptEntries


class Message:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tags: list[str] = []


class Part:
    def __init__(self, text: str) -> None:
        self.text = text


class Parted:
    """A message whose state lists its parts' attributes too (as Pydantic AI's does)."""

    def __init__(self, texts: list[str]) -> None:
        self.parts = [Part(text) for text in texts]
        self.usage: Part | None = Part("0") if len(texts) > 1 else None


def _convert(message: Any) -> list[Entry]:
    if isinstance(message, Parted):
        usage = message.usage.text if message.usage else None
        return [
            Entry({"role": "user", "content": f"{part.text} {usage}"}, message)
            for part in message.parts
        ]
    return [Entry({"role": "user", "content": f"{message.text} {message.tags}"}, message)]


def _parted_state(message: Parted) -> list[dict[str, Any]]:
    usage = [vars(message.usage)] if message.usage else []
    return [vars(message), *map(vars, message.parts), *usage]


def _parted_snapshot(message: Parted) -> list[dict[str, Any]]:
    """The parts themselves, compared by identity, then their fields by value."""
    usage = [dict(vars(message.usage))] if message.usage else []
    top = {"parts": list(message.parts), "usage": message.usage}
    return [top, *(dict(vars(part)) for part in message.parts), *usage]


Op = tuple[str, int, str]
OPS = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "edit", "tag", "replace", "drop", "move", "part", "usage"]),
            st.integers(0, 20),
            st.sampled_from(["a", "b", "c"]),
        ),
        max_size=4,
    ),
    max_size=12,
)


def _apply(history: list[Any], op: Op, parted: bool, edited: set[int]) -> list[Any]:
    kind, at, text = op
    new = Parted([text] * (1 + at % 2)) if parted else Message(text)
    if kind == "add" or not history:
        return [*history, new]
    at %= len(history)
    target = history[at]
    if kind in ("edit", "tag", "part", "usage"):
        edited.add(id(target))
    if kind == "edit":
        if isinstance(target, Parted):
            target.parts = [Part(text)]
        else:
            target.text += text
    elif kind == "tag" and isinstance(target, Message):
        target.tags.append(text)
    elif kind == "part" and isinstance(target, Parted):
        target.parts[0].text += text
    elif kind == "usage" and isinstance(target, Parted):
        if target.usage is None or text == "c":
            target.usage = Part(text)  # (another object, or one where there was none)
        else:
            target.usage.text += text
    elif kind == "replace":
        return [*history[:at], new, *history[at + 1 :]]
    elif kind == "drop":
        return [*history[:at], *history[at + 1 :]]
    elif kind == "move":
        return [*history[:at], *history[at + 1 :], target]
    return list(history)


@settings(max_examples=150, deadline=None, database=None)
@given(OPS, st.sampled_from(["vars", "state"]))
def test_kept_entries_are_a_fresh_conversion_of_every_object(
    requests: list[list[Op]], compared: str
) -> None:
    """Objects compared by their own attributes (``vars``), or holding others whose
    attributes count too, listed by a state function of the adapter's."""
    parted = compared != "vars"
    kept = {
        "vars": lambda: KeptEntries(_convert),
        "state": lambda: KeptEntries(_convert, _parted_state, _parted_snapshot),
    }[compared]()
    history: list[Any] = []
    before: dict[int, tuple[Any, list[Entry]]] = {}
    for ops in requests:
        edited: set[int] = set()
        for op in ops:
            history = _apply(history, op, parted, edited)
        entries = kept.entries(history)
        assert [e.message for e in entries] == [e.message for o in history for e in _convert(o)]
        now: dict[int, tuple[Any, list[Entry]]] = {}
        at = 0
        for obj in history:
            size = len(_convert(obj))
            mine = now[id(obj)] = (obj, entries[at : at + size])
            assert all(entry.original is obj for entry in mine[1])  # its own, never a twin's
            last = before.get(id(obj))
            if last is not None and last[0] is obj and id(obj) not in edited:
                assert all(map(lambda a, b: a is b, last[1], mine[1]))  # kept as they were
            at += size
        before = now
