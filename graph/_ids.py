"""Node and session ids: short, sortable, path- and URL-safe, globally unique.

Ids end up in file names, cached placeholders and layer keys, so they use only
``[0-9A-Z]`` (a ULID: 48 bits of milliseconds, 80 random bits, Crockford base32).

>>> len(new_id()), is_safe_id(new_id())
(26, True)
"""

from __future__ import annotations

import itertools
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ._errors import InvalidText

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]
_SHIFTS = range(120, -1, -10)
_TIME_SHIFTS = range(40, -1, -10)
_SOURCE: ContextVar[Callable[[], int] | None] = ContextVar("openprogram_ids", default=None)


_stamp: tuple[int, str] = (-1, "")
"""The last millisecond an id was made in and its ten characters (an import makes many
ids a millisecond; one tuple, so threads swap it whole)."""


_CHARACTERS = bytes(ord(_ALPHABET[byte & 31]) for byte in range(256))
"""Random bytes to base32 characters: each byte's low five bits pick one, uniformly."""
_POOL_IDS = 256


def _fresh_pool() -> tuple[str, Iterator[int]]:
    """Random characters for ``_POOL_IDS`` ids, and the count that hands out their places."""
    return os.urandom(16 * _POOL_IDS).translate(_CHARACTERS).decode(), itertools.count(0, 16)


_pool = _fresh_pool()
"""Random characters read from the OS a few kilobytes at a time (one system call per 256
ids, not one per id). Each place in a pool is handed out once, by its ``count``, so
threads never share one, and a forked child starts a pool of its own."""
_refill = threading.Lock()


def _renew_pool() -> None:
    global _pool
    _pool = _fresh_pool()


os.register_at_fork(after_in_child=_renew_pool)


def _random_part() -> str:
    """16 random base32 characters (80 bits, from ``os.urandom``)."""
    global _pool
    while True:
        text, places = _pool
        at = next(places)
        if at < len(text):
            return text[at : at + 16]
        with _refill:
            if _pool[1] is places:  # nobody refilled it meanwhile
                _pool = _fresh_pool()


def new_id() -> str:
    """Return a new ULID string (26 characters, time-ordered to the millisecond).

    An import makes one id per node, so the time's ten characters are made once a
    millisecond (ten bits, two characters, at a time from a table) and the sixteen random
    ones come from a pool (``_random_part``).
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
    return stamp[1] + _random_part()


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


def check_text(value: str, what: str) -> str:
    """``value`` when it is text a database can store; an :class:`InvalidText` naming
    ``what`` (the argument) when it holds a lone surrogate, which UTF-8 cannot encode.

    >>> check_text("01HZX", "node id")
    '01HZX'
    >>> check_text("x\\udfff", "node id")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    graph._errors.InvalidText: node id 'x\\udfff' is not valid text: it holds a lone surrogate...
    """
    if _SURROGATE.search(value):
        raise InvalidText(what, value)
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")
