"""A request body decoded past the bytes a recent request already held is the body decoded
whole: whatever the later request changed (an item edited, taken away or added, members
before or after the list, whitespace, a name given twice, bytes that are not JSON)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# internal: the exactness of the byte-prefix reuse is this module's own property (through
# `Proxy.prepare` it shows only as the body sent, checked in test_proxy_kept_conversions)
from openprogram.proxy._kept_bodies import KeptBodies

KEY = "input"
text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), text)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("abc"), inner, max_size=3)
    ),
    max_leaves=6,
)
items = st.dictionaries(st.sampled_from(["role", "type", "content", "id"]), values, max_size=4)
names = st.sampled_from(["model", "tools", "store", KEY, "\\u0069nput"])
spaces = st.sampled_from(["", " ", "\n  ", "\t"])


@st.composite
def bodies(draw: st.DrawFn) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """Members before and after the list (a name may repeat, the list's own included)."""
    before = draw(st.lists(st.tuples(names, values), max_size=3))
    after = draw(st.lists(st.tuples(names, values), max_size=2))
    return before, after


def _written(
    before: list[tuple[str, Any]],
    listed: list[Any],
    after: list[tuple[str, Any]],
    space: str,
    ascii_only: bool,
) -> bytes:
    def value(v: Any) -> str:
        return json.dumps(v, ensure_ascii=ascii_only, separators=("," + space, ":" + space))

    def member(name: str, written: str) -> str:
        return f'"{name}"' + ":" + space + written

    inner = ("," + space).join(value(item) for item in listed)
    members = [member(n, value(v)) for n, v in before]
    members.append(member(KEY, "[" + space + inner + space + "]"))
    members += [member(n, value(v)) for n, v in after]
    return ("{" + space + ("," + space).join(members) + space + "}").encode()


def _same(kept: KeptBodies, raw: bytes) -> None:
    try:
        expected = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        with pytest.raises(msgspec.DecodeError):
            kept.decode(raw, KEY)
        return
    got = kept.decode(raw, KEY)
    assert got == expected
    assert isinstance(got, dict) and list(got) == list(expected)  # the members' order too


edits = st.sampled_from(["append", "edit", "truncate", "space", "ascii", "members", "same"])


@settings(max_examples=200, deadline=None)
@given(
    shape=bodies(),
    first=st.lists(items, min_size=1, max_size=6),
    steps=st.lists(st.tuples(edits, st.integers(0, 10), items, bodies()), max_size=6),
    space=spaces,
)
def test_a_body_decoded_from_a_kept_prefix_is_the_body_decoded_whole(
    shape: tuple[list[tuple[str, Any]], list[tuple[str, Any]]],
    first: list[Any],
    steps: list[tuple[str, int, Any, tuple[list[tuple[str, Any]], list[tuple[str, Any]]]]],
    space: str,
) -> None:
    kept = KeptBodies()
    before, after = shape
    listed, ascii_only = list(first), False
    _same(kept, _written(before, listed, after, space, ascii_only))
    for edit, at, item, (other_before, other_after) in steps:
        if edit == "append":
            listed.append(item)
        elif edit == "edit" and listed:
            listed[at % len(listed)] = item
        elif edit == "truncate":
            listed = listed[: at % (len(listed) + 1)]
        elif edit == "space":
            space = " " if space != " " else ""
        elif edit == "ascii":
            ascii_only = not ascii_only
        elif edit == "members":
            before, after = other_before, other_after
        raw = _written(before, listed, after, space, ascii_only)
        _same(kept, raw)


@pytest.mark.parametrize(
    "later",
    [
        b'{"model": "m", "input": [{"a": 1}, {"b": 2},]}',  # a trailing comma
        b'{"model": "m", "input": [{"a": 1}, {"b": 2}] "x": 1}',  # a missing comma
        b'{"model": "m", "input": [{"a": 1}, {"b": 2}], "input": [7]}',  # the list again
        b'{"model": "m", "input": [{"a": 1}, {"b": 2}], "model": "n"}',  # a member again
        b'{"model": "m", "input": [{"a": 1}, {"b": 2}]',  # cut short
        b'{"model": "m", "input": [{"a": 1}, {"b": 2}, 3]} trailing',
        b'{"model": "m", "input": [{"a": 1}{"b": 2}]}',
        b'{"model": "m", "input": [{"a": 1}, {"b": 2}]}',
    ],
)
def test_what_follows_a_shared_prefix_is_read_as_the_whole_body_reads_it(later: bytes) -> None:
    kept = KeptBodies()
    _same(kept, b'{"model": "m", "input": [{"a": 1}, {"b": 2}], "store": false}')
    _same(kept, later)


def test_the_newest_bodies_are_kept_and_each_lends_its_prefix() -> None:
    kept = KeptBodies(kept=2)
    raws = [_written([("model", f"m{n}")], [{"n": n}] * 3, [], " ", False) for n in range(4)]
    for raw in raws:
        _same(kept, raw)
    for raw in reversed(raws):  # the oldest were let go: decoded whole again, the same
        _same(kept, raw + b" ")


def test_the_items_a_later_body_shares_are_the_objects_decoded_before() -> None:
    """What converts them finds the shared part by identity (a changed item is new)."""
    kept = KeptBodies()
    listed = [{"role": "user", "content": f"say {n}"} for n in range(5)]
    first = kept.decode(_written([("model", "m")], listed, [("store", False)], " ", False), KEY)
    listed[3] = {"role": "user", "content": "changed"}
    later = _written([("model", "m")], [*listed, {"n": 5}], [("store", True)], " ", False)
    second = kept.decode(later, KEY)
    assert isinstance(first, dict) and isinstance(second, dict)
    assert second == msgspec.json.decode(later)
    assert [a is b for a, b in zip(first[KEY], second[KEY], strict=False)] == [1, 1, 1, 0, 0]
