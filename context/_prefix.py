"""How far two sequences start alike, counted in C.

A steady render shares almost all of its prompt with the one before (the very objects,
mostly), and so does each request a framework or a client resends; whatever resumes from
the last one (the integrity passes, the receipt log, the adapters' and the proxy's kept
conversions) looks for the shared start first. A Python loop over the whole history for
that would cost what the history holds, not what changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, count, islice
from operator import is_not


def same_prefix(old: Sequence[object], new: Sequence[object]) -> int:
    """How many leading entries of ``old`` and ``new`` are the very same objects.

    >>> a, b = {"role": "user"}, {"role": "user"}
    >>> same_prefix([a, a, b], [a, a, a])
    2
    >>> same_prefix([a], [a, b])
    1
    """
    return next(compress(count(), map(is_not, old, new)), min(len(old), len(new)))


def equal_prefix(old: Sequence[object], new: Sequence[object]) -> int:
    """How many leading entries of ``old`` and ``new`` are equal (the same object is).

    The lists are compared whole first, then halved where they part: a list comparison
    passes over the very same objects by identity, where comparing two equal entries one
    by one would walk each of them.

    >>> equal_prefix([{"a": 1}, {"b": 2}, 3], ({"a": 1}, {"b": 2}, 4, 5))
    2
    """
    limit = min(len(old), len(new))
    before, after = _first(old, limit), _first(new, limit)
    if before == after:
        return limit
    low, high = 0, limit  # the first ``low`` are shared, the first ``high`` are not
    while high - low > 1:
        middle = (low + high) // 2
        if before[low:middle] == after[low:middle]:
            low = middle
        else:
            high = middle
    return low


def _first(values: Sequence[object], count: int) -> list[object]:
    """The first ``count`` of ``values`` as a list: ``values`` itself, not a copy, when it is
    a list of that length (it is only compared and sliced here, never changed)."""
    if type(values) is list and len(values) == count:
        return values
    return list(islice(values, count))
