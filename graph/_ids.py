"""Node and session ids: short, sortable, path- and URL-safe, globally unique.

Ids end up in file names, cached placeholders and layer keys, so they use only
``[0-9A-Z]`` (a ULID: 48 bits of milliseconds, 80 random bits, Crockford base32).

>>> len(new_id()), is_safe_id(new_id())
(26, True)
"""

from __future__ import annotations

import os
import re
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]
_SHIFTS = range(120, -1, -10)


def new_id() -> str:
    """Return a new ULID string (26 characters, time-ordered to the millisecond).

    Encoded ten bits (two characters) at a time from a table: half the steps of five
    bits at a time (an import makes one id per node).
    """
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    pairs = _PAIRS
    return "".join([pairs[(value >> shift) & 1023] for shift in _SHIFTS])


def is_safe_id(value: str) -> bool:
    """True when ``value`` can stand as one path segment or URL part on any platform.

    >>> is_safe_id("01HZX-run.1"), is_safe_id("../etc"), is_safe_id("a/b"), is_safe_id("")
    (True, False, False, False)
    """
    return bool(_SAFE.fullmatch(value)) and value not in {".", ".."} and ".." not in value
