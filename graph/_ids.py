"""Node and session ids: short, sortable, path- and URL-safe, globally unique.

Ids end up in file names, cached placeholders and layer keys, so they use only
``[0-9A-Z]`` (a ULID: 48 bits of milliseconds, 80 random bits, Crockford base32).

>>> len(new_id()), is_safe_id(new_id())
(26, True)
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]
_SHIFTS = range(120, -1, -10)
_TIME_SHIFTS = range(40, -1, -10)
_SOURCE: ContextVar[Callable[[], int] | None] = ContextVar("openprogram_ids", default=None)


_stamp: tuple[int, str] = (-1, "")
"""The last millisecond an id was made in and its ten characters (an import makes many
ids a millisecond; one tuple, so threads swap it whole)."""


class _Pool(threading.local):
    """Random bytes read from the OS a few kilobytes at a time, one pool per thread (two
    threads never share a slice), emptied in a forked child (which must not repeat its
    parent's ids): one system call per 400 ids instead of one per id."""

    data = b""
    at = 0


_pool = _Pool()
_POOL_BYTES = 4_000
os.register_at_fork(after_in_child=_pool.__dict__.clear)


def _random_bits() -> int:
    """80 fresh random bits from the OS (``os.urandom``, through this thread's pool)."""
    pool = _pool
    at = pool.at
    if at >= len(pool.data):
        pool.data, at = os.urandom(_POOL_BYTES), 0
    pool.at = at + 10
    return int.from_bytes(pool.data[at : at + 10], "big")


def new_id() -> str:
    """Return a new ULID string (26 characters, time-ordered to the millisecond).

    Encoded ten bits (two characters) at a time from a table: half the steps of five
    bits at a time (an import makes one id per node); the time's ten characters are made
    once a millisecond.
    """
    global _stamp
    source = _SOURCE.get()
    pairs = _PAIRS
    if source is not None:
        value = source()
        return "".join([pairs[(value >> shift) & 1023] for shift in _SHIFTS])
    ms = time.time_ns() // 1_000_000
    stamp = _stamp
    if stamp[0] != ms:
        stamp = _stamp = (ms, "".join([pairs[(ms >> shift) & 1023] for shift in _TIME_SHIFTS]))
    r = _random_bits()
    return (
        stamp[1]
        + pairs[r >> 70]
        + pairs[(r >> 60) & 1023]
        + pairs[(r >> 50) & 1023]
        + pairs[(r >> 40) & 1023]
        + pairs[(r >> 30) & 1023]
        + pairs[(r >> 20) & 1023]
        + pairs[(r >> 10) & 1023]
        + pairs[r & 1023]
    )


@contextmanager
def seeded_ids(seed: str, at_ms: int = 0) -> Iterator[None]:
    """Ids made inside (in this thread or task) come from a generator seeded by ``seed``:
    the same steps make the same ids, run after run. A replay renders ids into its
    placeholders, and random ids tokenize differently each time, so a bench over fresh
    imports would not repeat its own figures. Not for stores other writers share.

    >>> with seeded_ids("trace-1"):
    ...     first = [new_id(), new_id()]
    >>> with seeded_ids("trace-1"):
    ...     again = [new_id(), new_id()]
    >>> first == again and first[0] < first[1]
    True
    """
    generator = random.Random(seed)
    made = [at_ms]

    def next_value() -> int:
        made[0] += 1
        return (made[0] << 80) | generator.getrandbits(80)

    token = _SOURCE.set(next_value)
    try:
        yield
    finally:
        _SOURCE.reset(token)


_RESERVED = re.compile(r"(CON|PRN|AUX|NUL|COM[0-9]|LPT[0-9])(\..*)?", re.IGNORECASE)
"""Device names Windows reserves in every folder, with any extension (``NUL.txt`` too)."""


def is_safe_id(value: str) -> bool:
    """True when ``value`` can stand as one path segment or URL part on any platform:
    ``[A-Za-z0-9_.-]``, up to 128 characters, starting with a letter or digit, never
    ``..``, never ending in a dot (Windows drops it), never a name Windows reserves for a
    device (``CON``, ``NUL.txt``, ``com1``…).

    >>> is_safe_id("01HZX-run.1"), is_safe_id("../etc"), is_safe_id("a/b"), is_safe_id("")
    (True, False, False, False)
    >>> is_safe_id("CON"), is_safe_id("NUL.txt"), is_safe_id("x."), is_safe_id("console")
    (False, False, False, True)
    """
    return (
        bool(_SAFE.fullmatch(value))
        and ".." not in value
        and not value.endswith(".")
        and not _RESERVED.fullmatch(value)
    )
