"""Request bodies decoded only past the bytes a recent request already held.

Every request of a conversation carries the whole history again, so a body's bytes mostly
begin with a recent request's bytes. A kept body remembers where each item of its history
list (``input`` or ``messages``) ends; a new body that begins with the same bytes through
its ``k``-th item's end holds the same members before the list and the same ``k`` items
(a JSON parser's state after a prefix depends on the prefix alone), so those are reused
as they were decoded, and only the rest is decoded: the remaining items and the members
after the list, read as a small body of their own. Anything unexpected there (a trailing
comma, a second member of the list's name, bytes that are not JSON) decodes the whole
body instead, so the result is always what decoding it whole gives.

Reused items are the very objects the last request had, so what converts them can find
the shared part by identity; nothing may change them in place (the proxy never does: what
it changes, it copies).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

__all__ = ["KeptBodies"]

KEPT = 16
"""Bodies kept (the least recently used go): one per live conversation is enough."""
SPACE = b" \t\r\n"
"""JSON's whitespace (``bytes.strip()`` would take more)."""
_MEMBERS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])


@dataclass(frozen=True, eq=False)
class _Kept:
    """A decoded body, the members before its list, its items, and where each item's
    bytes end in ``raw``."""

    raw: bytes
    key: str
    head: dict[str, object]
    items: tuple[object, ...]
    ends: Sequence[int]


class KeptBodies:
    """The last bodies decoded, each ready to lend its prefix to the next (thread-safe)."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._bodies: list[_Kept] = []
        self._lock = threading.Lock()

    def decode(self, raw: bytes, key: str) -> object:
        """``raw`` decoded (as ``msgspec.json.decode`` does), reusing a kept body's part
        for the bytes they share; ``key`` names the history list."""
        with self._lock:
            candidates = [kept for kept in reversed(self._bodies) if kept.key == key]
        best, shared = None, 0
        for candidate in candidates:
            found = _shared_items(candidate, raw, shared)
            if found > shared:
                best, shared = candidate, found
                if shared == len(candidate.ends):
                    break
        made = _continued(best, shared, raw) if best is not None else None
        kept: _Kept | None
        if made is None:
            body = msgspec.json.decode(raw)
            kept = _whole(body, raw, key)
        else:
            kept, body = made
        if kept is not None:
            with self._lock:
                if best in self._bodies:  # by identity (eq=False)
                    self._bodies.remove(best)
                self._bodies.append(kept)
                del self._bodies[: max(len(self._bodies) - self.kept, 0)]
        return body


def _shared_items(kept: _Kept, raw: bytes, better_than: int) -> int:
    """How many of ``kept``'s items ``raw`` holds byte for byte from its start (0 when
    not more than ``better_than``)."""
    ends, view = kept.ends, memoryview(kept.raw)
    if len(ends) <= better_than or not raw.startswith(view[: ends[better_than]]):
        return 0
    low, high = better_than + 1, len(ends)  # low items are shared; high are not, unless all
    if raw.startswith(view[: ends[high - 1]]):
        return high
    step = 1
    while high - step > low:  # gallop back from the end: a client changes its newest items
        probe = high - step
        if raw.startswith(view[: ends[probe - 1]]):
            low = probe
            break
        high, step = probe, step * 2
    while high - low > 1:
        middle = (low + high) // 2
        if raw.startswith(view[: ends[middle - 1]]):
            low = middle
        else:
            high = middle
    return low


def _continued(kept: _Kept, shared: int, raw: bytes) -> tuple[_Kept, object] | None:
    """``raw`` as ``kept``'s first ``shared`` items and members before the list, and the
    rest decoded; None when the rest does not read as the list's continuation."""
    start = kept.ends[shared - 1]
    rest = raw[start:].lstrip(SPACE)
    if rest[:1] == b",":
        rest = rest[1:]
        if rest.lstrip(SPACE)[:1] == b"]":  # a trailing comma: not JSON
            return None
    elif rest[:1] != b"]":
        return None
    listing = b"[" + rest  # the list from its next item on, and the members after it
    try:
        members = _MEMBERS.decode(b'{"' + kept.key.encode() + b'":' + listing)
        listed = bytes(members.pop(kept.key))
        if not listing.startswith(listed):  # another member of that name, later on
            return None
        new = _ITEMS.decode(listed)
        after = {name: msgspec.json.decode(value) for name, value in members.items()}
    except (msgspec.DecodeError, KeyError):
        return None
    ends = [*kept.ends[:shared], *_item_ends(raw, new, start)]
    items = (*kept.items[:shared], *(msgspec.json.decode(item) for item in new))
    body = {**kept.head, kept.key: list(items), **after}
    return _Kept(raw, kept.key, kept.head, items, ends), body


def _whole(body: object, raw: bytes, key: str) -> _Kept | None:
    """A body decoded whole, kept with where its items end (None: nothing to lend)."""
    if not isinstance(body, dict) or not isinstance(items := body.get(key), list) or not items:
        return None
    listed = bytes(_MEMBERS.decode(raw)[key])
    start = raw.find(listed)
    if raw.find(listed, start + 1) >= 0:  # the same bytes twice: which one is the list?
        return None
    head = msgspec.json.decode(raw[:start] + b"[]}")
    return _Kept(raw, key, head, tuple(items), _item_ends(raw, _ITEMS.decode(listed), start))


def _item_ends(raw: bytes, items: Sequence[msgspec.Raw], at: int) -> list[int]:
    """Where each of ``items`` (in order, the first at or after ``at``) ends in ``raw``."""
    ends = []
    for item in items:
        written = bytes(item)
        at = raw.index(written, at) + len(written)
        ends.append(at)
    return ends
