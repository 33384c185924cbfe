"""How far two sequences start alike, counted in C.

A steady render shares almost all of its prompt with the one before (the very objects,
mostly), so the parts that resume from the last render (the integrity passes, the receipt
log) look for the shared start first; a Python loop over the whole history for that would
cost what the history holds, not what changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, count
from operator import is_not, ne


def same_prefix(old: Sequence[object], new: Sequence[object]) -> int:
    """How many leading entries of ``old`` and ``new`` are the very same objects."""
    return next(compress(count(), map(is_not, old, new)), min(len(old), len(new)))


def equal_prefix(old: Sequence[object], new: Sequence[object]) -> int:
    """How many leading entries of ``old`` and ``new`` are equal (the same object is)."""
    shared = min(len(old), len(new))
    if old[:shared] == new[:shared]:  # one compare in C that skips the very same objects
        return shared
    return next(compress(count(), map(ne, old, new)), shared)
