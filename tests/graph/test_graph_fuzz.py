"""Fuzzing ``graph.append``: any message, ``at`` and ``meta`` either appends or raises a
``GraphError``; a rejected append stores nothing, an accepted one reads back as appended.

Also the regressions the fuzzing found (reliability defect 6 and its relatives): a lone
surrogate, a non-string key, deep nesting or an unwritable int raised ``UnicodeEncodeError``,
``TypeError``, ``RecursionError`` or ``ValueError`` instead of ``InvalidMessage``. A lone
surrogate is refused (see ``graph._codec``); a NUL character is stored losslessly, on
PostgreSQL too (its text columns refuse a raw NUL, the JSON escape is fine).
"""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime
from typing import Any

import pytest
from _graph_helpers import call, graph_state, stored_state
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graph import ConversationGraph, GraphError, InvalidMessage, Redactor

MAX_DEPTH = 100  # the nesting limit an InvalidMessage names ("nested deeper than 100 levels")

_SESSIONS = itertools.count()


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class _SurrogateRepr:
    def __repr__(self) -> str:
        return "odd\udc80"


def _huge_int() -> int:
    """Too long to write as decimal text (built lazily: hypothesis reprs its constants)."""
    return -(10**5000)


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = [value] if level % 2 else {"in": value}
    return value


# -- strategies ---------------------------------------------------------------------------
ODD_TEXT = st.sampled_from(["\ud800", "a\udfffb", "\x00", "nul\x00end", "é\u2028\U0001f600", ""])
TEXT = st.text(st.characters(exclude_categories=()), max_size=12) | ODD_TEXT | st.text(max_size=12)
ODD_OBJECTS = (
    st.sampled_from(
        [
            object(),
            {1, 2},
            {1, "a"},
            frozenset(),
            b"by\x00tes",
            1 + 2j,
            datetime(2024, 1, 1, tzinfo=UTC),
            10**30,
            2**63,
            float("nan"),
            float("inf"),
        ]
    )
    | st.builds(_BadRepr)
    | st.builds(_SurrogateRepr)
)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | TEXT | st.sampled_from([10**20])
KEYS = TEXT | st.integers(-2, 2) | st.none()
JSONISH = st.recursive(
    SCALARS | ODD_OBJECTS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3) | st.tuples(inner)
    ),
    max_leaves=8,
)
DEEP = st.sampled_from([MAX_DEPTH - 5, MAX_DEPTH + 1, 400, 2_000]).map(_nested)
PART = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["text", "image_url", "input_audio", ""]) | SCALARS,
        "text": TEXT | JSONISH,
        "image_url": st.fixed_dictionaries({"url": TEXT}) | TEXT | JSONISH,
        "extra": JSONISH | DEEP,
    },
)
CONTENT = st.none() | TEXT | st.lists(PART | JSONISH, max_size=3) | JSONISH | DEEP
CALL = st.fixed_dictionaries(
    {},
    optional={
        "id": st.sampled_from(["c1", "c9", "fresh", ""]) | TEXT | SCALARS,
        "type": st.just("function") | SCALARS,
        "function": st.fixed_dictionaries(
            {},
            optional={
                "name": st.sampled_from(["read", "bash"]) | TEXT | SCALARS,
                "arguments": TEXT | JSONISH | DEEP | st.just({"a": object(), "b": [1]}),
            },
        )
        | JSONISH,
    },
)
MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["system", "user", "assistant", "tool"])
        | st.sampled_from(["robot", "USER", "", None, 1, ("user",)]),
    },
    optional={
        "content": CONTENT,
        "tool_calls": st.lists(CALL | JSONISH, max_size=3) | JSONISH,
        "tool_call_id": st.sampled_from(["c1", "c2", "nope"]) | TEXT | SCALARS,
        "name": TEXT | SCALARS,
        "thinking": TEXT | SCALARS,
        "reasoning_content": TEXT,
        "is_error": st.booleans() | SCALARS,
        "extra_field": JSONISH,
    },
)
AT = (
    st.none()
    | st.sampled_from(
        [
            10**20,
            -1e15,
            "9999-12-31T23:59:59-01:00",
            "0001-01-01T00:30:00+01:00",
            float("nan"),
            float("inf"),
            -1,
            0,
            1.7e9,
            "2024-02-30T00:00:00",
            "2024-01-01T00:00:00Z",
            "yesterday",
            True,
            datetime(9999, 12, 31, 23, 59, tzinfo=UTC),
            datetime(2024, 1, 1),
            10**400,
        ]
    )
    | st.integers()
    | st.floats()
    | TEXT
)
META = st.none() | st.dictionaries(KEYS, JSONISH | DEEP, max_size=3) | JSONISH


def _fresh(url: str) -> ConversationGraph:
    """A session with two pending calls (``c1``, ``c2``), so tool results can land."""
    g = ConversationGraph.open(url, session=f"fuzz{next(_SESSIONS)}")
    g.append({"role": "user", "content": "go"})
    g.append({"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2")]})
    return g


@settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(
    message=MESSAGE | JSONISH,
    at=AT,
    meta=META,
    redact=st.booleans(),
    framed=st.booleans(),
)
def test_append_stores_or_refuses_cleanly(
    store_url: str, message: Any, at: Any, meta: Any, redact: bool, framed: bool
) -> None:
    g = _fresh(store_url)
    if redact:
        g.redactor = Redactor()
    before = graph_state(g)
    try:
        if framed:
            with g.function("fuzzed"):
                inside = graph_state(g)
                try:
                    g.append(message, at=at, meta=meta)
                except GraphError:
                    assert graph_state(g) == inside
                    raise
        else:
            g.append(message, at=at, meta=meta)
    except GraphError as error:
        assert str(error)
        if not framed:
            assert graph_state(g) == before
            assert stored_state(store_url, g.session) == before
    else:
        assert graph_state(g)["last_seq"] > before["last_seq"]
    # whatever happened, the store and the live graph agree
    assert stored_state(store_url, g.session) == graph_state(g)
    g.close()


# -- regressions --------------------------------------------------------------------------
SURROGATE_CASES: list[tuple[dict[str, Any], dict[str, Any], str]] = [
    ({"role": "user", "content": "a\ud800b"}, {}, "content"),
    ({"role": "user", "content": [{"type": "text", "text": "\udfff"}]}, {}, "content[0].text"),
    ({"role": "user", "content": "x", "name": "n\ud800"}, {}, "name"),
    ({"role": "assistant", "content": "x", "thinking": "\ud800"}, {}, "thinking"),
    (
        {"role": "assistant", "content": None, "tool_calls": [call("c\ud800")]},
        {},
        "tool_calls[0].id",
    ),
    (
        {"role": "assistant", "content": None, "tool_calls": [call("ok", "f", {"q": "\ud800"})]},
        {},
        "tool_calls[0].function.arguments.q",
    ),
    ({"role": "tool", "tool_call_id": "c1", "content": "out\ud800"}, {}, "content"),
    ({"role": "user", "content": "x"}, {"meta": {"k": ["\ud800"]}}, "meta.k[0]"),
    ({"role": "user", "content": "x"}, {"meta": {"k\ud800": 1}}, "meta"),
]


@pytest.mark.parametrize(("message", "kwargs", "field"), SURROGATE_CASES)
def test_a_lone_surrogate_is_refused_naming_the_field(
    store_url: str, message: dict[str, Any], kwargs: dict[str, Any], field: str
) -> None:
    g = _fresh(store_url)
    before = graph_state(g)
    with pytest.raises(InvalidMessage, match="surrogate") as caught:
        g.append(message, **kwargs)
    assert caught.value.field == field
    assert graph_state(g) == before
    assert stored_state(store_url, g.session) == before


def test_nul_characters_are_stored_losslessly(store_url: str) -> None:
    g = _fresh(store_url)
    nul = "before\x00after"
    g.append({"role": "tool", "tool_call_id": "c1", "content": nul})
    g.append(
        {"role": "assistant", "content": [{"type": "text", "text": nul}], "name": nul},
        meta={nul: nul},
    )
    g.append({"role": "assistant", "content": nul, "thinking": nul})
    g.append({"role": "assistant", "content": None, "tool_calls": [call(nul, nul, {nul: nul})]})
    reopened = stored_state(store_url, g.session)
    assert reopened == graph_state(g)
    text = repr(reopened["openai"])
    assert text.count("before\\x00after") >= 6


@pytest.mark.parametrize(
    "at", [10**20, -1e15, "9999-12-31T23:59:59-01:00", float("nan"), 10**400, True, "soon"]
)
def test_an_impossible_time_is_an_invalid_message(store_url: str, at: Any) -> None:
    g = _fresh(store_url)
    before = graph_state(g)
    with pytest.raises(InvalidMessage) as caught:
        g.append({"role": "user", "content": "x"}, at=at)
    assert caught.value.field == "at"
    assert stored_state(store_url, g.session) == before


@pytest.mark.parametrize(
    ("kwargs", "field", "problem"),
    [
        ({"meta": {1: "x"}}, "meta", "key that is not a string"),
        (
            {"message": {"role": "user", "content": [{"type": "text", "text": "t", 2: 3}]}},
            "content[0]",
            "key that is not a string",
        ),
        (
            {"message": {"role": "user", "content": [{"type": "t", "n": 10**5000}]}},
            "content[0].n",
            "too long",
        ),
        ({"meta": {"a": _BadRepr()}}, "meta.a", "repr fails"),
        (
            {"meta": {"a": _nested(MAX_DEPTH + 1)}},
            "meta.a",
            f"nested deeper than {MAX_DEPTH} levels",
        ),
        (
            {"message": {"role": "user", "content": [{"type": "t", "x": _nested(5_000)}]}},
            "content[0].x",
            "nested deeper",
        ),
        (
            {"message": {"role": "assistant", "tool_calls": [call("c", "f", {"o": object()})]}},
            "tool_calls[0].function.arguments",
            "cannot be written as JSON",
        ),
    ],
)
def test_what_json_cannot_hold_is_an_invalid_message(
    kwargs: dict[str, Any], field: str, problem: str
) -> None:
    for redactor in (None, Redactor()):
        g = ConversationGraph.memory(redactor=redactor)
        message = kwargs.get("message", {"role": "user", "content": "x"})
        with pytest.raises(InvalidMessage, match=problem) as caught:
            g.append(message, meta=kwargs.get("meta"))
        assert caught.value.field.startswith(field)
        assert len(g) == 0


def test_nesting_up_to_the_limit_is_stored() -> None:
    g = ConversationGraph.memory()
    deep = _nested(MAX_DEPTH - 3)
    node = g.append({"role": "user", "content": [{"type": "t", "x": deep}]}, meta={"m": deep})
    assert node.payload.content[0]["x"] == deep  # type: ignore[union-attr,index]
    assert node.meta == {"m": deep}
    # NaN has no JSON form: it is stored as null, and append returns what was stored
    nan = g.append({"role": "user", "content": "y"}, meta={"n": math.nan})
    assert nan.meta == {"n": None}


def test_nesting_is_checked_in_what_is_stored() -> None:
    """The depth limit guards what is stored and walked later: deep content parts and tool
    results are refused naming the place; a key the graph does not keep is not walked, and
    tool-call arguments are stored as their JSON text, whatever their depth."""
    g = ConversationGraph.memory()
    deep = _nested(MAX_DEPTH + 20)
    for message, field in [
        ({"role": "user", "content": [{"type": "t", "x": deep}]}, "content[0].x"),
        ({"role": "assistant", "content": [{"type": "text", "text": "t", "x": deep}]}, "content"),
    ]:
        with pytest.raises(InvalidMessage, match="nested deeper") as caught:
            g.append(message)
        assert caught.value.field.startswith(field)
    assert len(g) == 0
    kept = g.append({"role": "user", "content": "ok", "extra": deep})
    assert kept.payload == g.get(kept.id).payload and g.to_openai()[-1]["content"] == "ok"
    g.append({"role": "assistant", "tool_calls": [call("c1", "f", {"a": _nested(MAX_DEPTH + 20)})]})
    with pytest.raises(InvalidMessage, match="nested deeper") as caught:
        g.append({"role": "tool", "tool_call_id": "c1", "content": [{"type": "t", "x": deep}]})
    assert caught.value.field.startswith("content[0].x")
    assert g.append({"role": "tool", "tool_call_id": "c1", "content": "done"}).status == "done"
