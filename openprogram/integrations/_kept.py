"""A framework's messages converted once: entries kept by the identity of the framework's
object, with a copy of its state that tells when it changed in place.

A framework resends its whole history with every request, as the very objects it holds, so
converting and digesting each of them again makes each request cost as much as the history
is long. :class:`KeptEntries` converts an object the first time it is seen and again only
when it is another object, or the same one with other values (a message edited in place,
``message.content = …``): its attributes are compared with a copy taken when it was
converted, an equality done in C that stops at once on the shared strings. Only the last
history's objects of each conversation are kept, so nothing outlives what the framework
itself holds.
"""

from __future__ import annotations

import copy
import datetime
import enum
import itertools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from context import equal_prefix, same_prefix
from openprogram.integrations._entry import Entry

__all__ = ["KeptEntries", "frozen"]

_ATOMS = frozenset(
    (str, int, float, bool, bytes, type(None), datetime.datetime, datetime.date, datetime.timedelta)
)
"""Immutable values, shared by a copy."""


def frozen(value: Any) -> Any:
    """A copy of ``value`` that a later change in place does not reach (immutable values are
    shared, containers copied, any other object deep-copied), equal to ``value`` as it is."""
    kind = type(value)
    if kind in _ATOMS or isinstance(value, enum.Enum):
        return value
    if kind is dict:
        return {key: frozen(item) for key, item in value.items()}
    if kind is list:
        return [frozen(item) for item in value]
    if kind is tuple:
        return tuple(frozen(item) for item in value)
    return copy.deepcopy(value)


class KeptEntries:
    """Entries of framework objects, converted by ``convert`` (one object to its entries) and
    kept while ``state`` (the object's values, as a list of attribute dicts: by default its
    own ``vars``) compares equal (``==``) to ``snapshot``, the copy taken when it was
    converted (by default a :func:`frozen` copy of the state; a framework's own may share
    the objects its state lists the attributes of, so that they are compared by identity
    and then by those attributes, never by their own ``__eq__``).

    A history that starts with the last call's objects (a framework resending its history
    with a new message) is checked as one: the shared start found by identity, then all of
    its states against their snapshots in one list comparison, both in C; only the objects
    after it are looked up one by one."""

    def __init__(
        self,
        convert: Callable[[Any], list[Entry]],
        state: Callable[[Any], Any] | None = None,
        snapshot: Callable[[Any], Any] | None = None,
    ) -> None:
        self._convert = convert
        # The default state is the object's own dict, taken by the builtin ``vars`` (no
        # Python call per object); a snapshot is then one frozen dict.
        self._state: Callable[[Any], Any] = state or vars
        if snapshot is not None:
            self._copy: Callable[[Any], Any] = snapshot
        elif state is not None:
            self._copy = lambda obj: [frozen(part) for part in state(obj)]
        else:
            self._copy = lambda obj: frozen(vars(obj))
        self._kept: dict[str | None, _Kept] = {}

    def entries(self, objects: Sequence[Any], conversation: str | None = None) -> list[Entry]:
        """The entries of ``objects``, in order (the same :class:`Entry` objects as the last
        call of ``conversation`` for what did not change, their digests with them)."""
        objects = list(objects)
        last = self._kept.get(conversation)
        shared = 0 if last is None else self._unchanged(objects, last)
        now = _Kept(objects[:shared], last.snapshots[:shared] if last else [], [])
        if last is not None:
            now.converted = last.converted[:shared]
            now.offsets = last.offsets[: shared + 1]
            now.entries = last.entries[: now.offsets[-1]]
        if shared < len(objects):
            self._rest(now, objects[shared:], last)
        self._kept[conversation] = now  # (replaced whole: a concurrent call reads either)
        return list(now.entries)

    def _unchanged(self, objects: list[Any], last: _Kept) -> int:
        """How many of ``objects`` start as the last call's did: the very objects, with the
        values they had when they were converted."""
        shared = same_prefix(objects, last.objects)
        if not shared:
            return 0
        snapshots = last.snapshots[:shared]
        try:
            if self._state is vars:  # the objects' own dicts: nothing is made
                if list(map(vars, objects[:shared])) == snapshots:
                    return shared
            # Each state compared as it is made and dropped at once (thousands of them
            # kept alive together would be promoted through the collector's generations).
            elif all(map(operator.eq, map(self._state, objects[:shared]), snapshots)):
                return shared
            return equal_prefix(list(map(self._state, objects[:shared])), snapshots)
        except Exception:  # an object whose state cannot be read: looked at one by one
            return 0

    def _rest(self, now: _Kept, objects: list[Any], last: _Kept | None) -> None:
        """Convert ``objects`` (those after the shared start), each kept from the last call
        where it is the same object with the same values."""
        for obj in objects:
            at = last.find(obj, len(objects)) if last is not None else None
            if at is not None and last is not None:
                snapshot, converted = last.snapshots[at], last.converted[at]
                if not self._same(obj, snapshot):
                    snapshot, converted = self._snapshot(obj), self._convert(obj)
            else:
                snapshot, converted = self._snapshot(obj), self._convert(obj)
            now.objects.append(obj)
            now.snapshots.append(snapshot)
            now.converted.append(converted)
            now.entries += converted
            now.offsets.append(len(now.entries))

    def _same(self, obj: Any, snapshot: Any) -> bool:
        try:
            return bool(self._state(obj) == snapshot)
        except Exception:  # its values cannot be read: converted again
            return False

    def _snapshot(self, obj: Any) -> Any:
        try:
            return self._copy(obj)
        except Exception:  # a value that cannot be copied: converted again every time
            return _Never()


@dataclass
class _Kept:
    """One conversation's last objects, each with its snapshot and entries (``offsets``:
    where each object's entries start in ``entries``, and where the last one's end)."""

    objects: list[Any]
    snapshots: list[Any]
    converted: list[list[Entry]]
    offsets: list[int] = field(default_factory=lambda: [0])
    entries: list[Entry] = field(default_factory=list)

    _where: dict[int, int] | None = field(default=None, init=False, repr=False)

    def find(self, obj: Any, looked: int) -> int | None:
        """Where ``obj`` (the very object) is among :attr:`objects`, if anywhere: a scan in
        C for the first few objects looked up (a history with a new message or two), the
        positions by identity for more."""
        if looked <= _SCANS:
            try:
                return operator.indexOf(
                    map(operator.is_, itertools.repeat(obj), self.objects), True
                )
            except ValueError:
                return None
        if self._where is None:
            objects = self.objects
            self._where = dict(zip(map(id, objects), range(len(objects)), strict=True))
        at = self._where.get(id(obj))
        return at if at is not None and self.objects[at] is obj else None


_SCANS = 4
"""Up to how many objects a call looks up by a scan of the last ones (each ~20 ns an
object, in C) rather than by a table of their positions (built once a call)."""


class _Never:
    """A state equal to no other (an object whose values could not be copied)."""

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]
