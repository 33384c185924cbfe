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
from collections.abc import Callable, Sequence
from typing import Any

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
    own) compares equal (``==``) to ``snapshot``, the copy taken when it was converted (by
    default a :func:`frozen` copy of the state; a framework's own may share the objects its
    state lists the attributes of, so that they are compared by identity and then by those
    attributes, never by their own ``__eq__``)."""

    def __init__(
        self,
        convert: Callable[[Any], list[Entry]],
        state: Callable[[Any], list[dict[str, Any]]] = lambda obj: [vars(obj)],
        snapshot: Callable[[Any], list[dict[str, Any]]] | None = None,
    ) -> None:
        self._convert = convert
        self._state = state
        self._copy = snapshot or (lambda obj: [frozen(part) for part in state(obj)])
        self._kept: dict[str | None, dict[int, tuple[Any, list[Any], list[Entry]]]] = {}

    def entries(self, objects: Sequence[Any], conversation: str | None = None) -> list[Entry]:
        """The entries of ``objects``, in order (the same :class:`Entry` objects as the last
        call of ``conversation`` for what did not change, their digests with them)."""
        kept, now, state = self._kept.get(conversation, {}), {}, self._state
        entries: list[Entry] = []
        for obj in objects:
            found = kept.get(id(obj))
            if found is None or found[0] is not obj or found[1] != state(obj):
                found = (obj, self._snapshot(obj), self._convert(obj))
            now[id(obj)] = found
            entries += found[2]
        self._kept[conversation] = now  # (replaced whole: a concurrent call reads either)
        return entries

    def _snapshot(self, obj: Any) -> list[Any]:
        try:
            return self._copy(obj)
        except Exception:  # a value that cannot be copied: converted again every time
            return [_Never()]


class _Never:
    """A state equal to no other (an object whose values could not be copied)."""

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]
