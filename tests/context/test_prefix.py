"""The shared-start helpers count what a plain loop counts."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from context import equal_prefix, same_prefix

_POOL = [{"role": "user", "content": str(n % 3)} for n in range(6)]
"""Six dicts, pairwise equal by content three ways: equal but not the same objects."""

_lists = st.lists(st.sampled_from(_POOL), max_size=40)


def _plain(old: list[object], new: list[object], alike: Callable[[object, object], bool]) -> int:
    shared = 0
    for a, b in zip(old, new, strict=False):
        if not alike(a, b):
            break
        shared += 1
    return shared


@given(_lists, _lists)
def test_same_prefix_counts_the_very_same_objects(old: list[object], new: list[object]) -> None:
    assert same_prefix(old, new) == _plain(old, new, lambda a, b: a is b)


@given(_lists, _lists)
def test_equal_prefix_counts_equal_values(old: list[object], new: list[object]) -> None:
    assert equal_prefix(old, new) == _plain(old, new, lambda a, b: a == b)
    assert equal_prefix(tuple(old), new) == equal_prefix(old, tuple(new)) == equal_prefix(old, new)


@given(_lists, st.integers(0, 40))
def test_a_list_shares_its_start_with_its_own_head(items: list[object], cut: int) -> None:
    head = items[:cut]
    assert same_prefix(items, head) == equal_prefix(items, head) == len(head)
