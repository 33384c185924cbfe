"""Rejected input: a clear GraphError naming the field, and nothing stored."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _graph_helpers import call, graph_state, stored_state

from graph import (
    ConversationGraph,
    CrossSessionError,
    DuplicateToolResult,
    FunctionFinished,
    GraphError,
    InvalidMessage,
    UnknownToolCall,
    dispose_engines,
)


@pytest.fixture
def url(store_url: str) -> Iterator[str]:
    yield store_url
    dispose_engines()


def _build(url: str) -> tuple[ConversationGraph, dict[str, str]]:
    g = ConversationGraph.open(url, session="main")
    ids: dict[str, str] = {}
    g.append({"role": "system", "content": "s"})
    g.append({"role": "user", "content": "u"})
    ids["asst"] = g.append(
        {"role": "assistant", "content": None, "tool_calls": [call("done"), call("open")]}
    ).id
    g.append({"role": "tool", "tool_call_id": "done", "content": "r"})
    with g.function("finished") as fn:
        ids["inner"] = g.append({"role": "assistant", "content": "inside"}).id
        fn.output = "out"
    ids["fn"] = fn.id
    ids["last"] = g.append({"role": "user", "content": "last"}).id
    other = ConversationGraph.open(url, session="other")
    ids["other"] = other.append({"role": "user", "content": "elsewhere"}).id
    other.close()
    return g, ids


def _append(message: Any, **kwargs: Any) -> Callable[[ConversationGraph, dict[str, str]], Any]:
    return lambda g, ids: g.append(message, **kwargs)


def _function(g: ConversationGraph, ids: dict[str, str]) -> Any:
    with g.function("late"):
        pass


def _fork_other(g: ConversationGraph, ids: dict[str, str]) -> Any:
    return g.fork(ids["other"])


def _fork_tool(g: ConversationGraph, ids: dict[str, str]) -> Any:
    return g.fork(g.tools(ids["asst"])[1].id)


USER = {"role": "user"}
ASSISTANT = {"role": "assistant", "content": None}

# (id, action, error type, field of an InvalidMessage or text the message must contain)
CASES: list[tuple[str, Callable[[ConversationGraph, dict[str, str]], Any], type, str]] = [
    (
        "unknown-call-id",
        _append({"role": "tool", "tool_call_id": "nope", "content": "x"}),
        UnknownToolCall,
        "'nope'",
    ),
    (
        "duplicate-result",
        _append({"role": "tool", "tool_call_id": "done", "content": "again"}),
        DuplicateToolResult,
        "'done'",
    ),
    (
        "call-without-id",
        _append({**ASSISTANT, "tool_calls": [{"type": "function", "function": {"name": "f"}}]}),
        InvalidMessage,
        "tool_calls[0].id",
    ),
    (
        "call-with-empty-id",
        _append({**ASSISTANT, "tool_calls": [call("ok"), call("")]}),
        InvalidMessage,
        "tool_calls[1].id",
    ),
    (
        "duplicate-call-ids",
        _append({**ASSISTANT, "tool_calls": [call("x"), call("x")]}),
        InvalidMessage,
        "tool_calls[1].id",
    ),
    (
        "call-id-already-pending",
        _append({**ASSISTANT, "tool_calls": [call("fresh"), call("open")]}),
        InvalidMessage,
        "tool_calls",
    ),
    (
        "call-without-function",
        _append({**ASSISTANT, "tool_calls": [{"id": "c"}]}),
        InvalidMessage,
        "tool_calls[0].function",
    ),
    (
        "call-without-name",
        _append({**ASSISTANT, "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}),
        InvalidMessage,
        "tool_calls[0].function.name",
    ),
    (
        "call-bad-arguments",
        _append({**ASSISTANT, "tool_calls": [call("c", "f", 42)]}),
        InvalidMessage,
        "tool_calls[0].function.arguments",
    ),
    (
        "tool-calls-not-a-list",
        _append({**ASSISTANT, "tool_calls": {"id": "c"}}),
        InvalidMessage,
        "tool_calls",
    ),
    (
        "tool-calls-on-user",
        _append({**USER, "content": "x", "tool_calls": [call("c")]}),
        InvalidMessage,
        "tool_calls",
    ),
    ("unknown-role", _append({"role": "robot", "content": "x"}), InvalidMessage, "role"),
    ("missing-role", _append({"content": "x"}), InvalidMessage, "role"),
    ("not-a-dict", _append(["user", "x"]), InvalidMessage, "message"),
    ("content-number", _append({**USER, "content": 42}), InvalidMessage, "content"),
    ("content-dict", _append({**USER, "content": {"text": "x"}}), InvalidMessage, "content"),
    (
        "part-not-object",
        _append({**USER, "content": [{"type": "text", "text": "a"}, "b"]}),
        InvalidMessage,
        "content[1]",
    ),
    (
        "part-without-type",
        _append({**USER, "content": [{"text": "a"}]}),
        InvalidMessage,
        "content[0].type",
    ),
    (
        "text-part-without-text",
        _append({**USER, "content": [{"type": "text", "text": 3}]}),
        InvalidMessage,
        "content[0].text",
    ),
    (
        "image-part-without-url",
        _append({**USER, "content": [{"type": "image_url", "image_url": {"detail": "low"}}]}),
        InvalidMessage,
        "content[0].image_url",
    ),
    (
        "tool-result-bad-content",
        _append({"role": "tool", "tool_call_id": "open", "content": 1.5}),
        InvalidMessage,
        "content",
    ),
    (
        "tool-without-call-id",
        _append({"role": "tool", "content": "x"}),
        InvalidMessage,
        "tool_call_id",
    ),
    ("thinking-not-text", _append({**ASSISTANT, "thinking": 1}), InvalidMessage, "thinking"),
    ("name-not-text", _append({**USER, "content": "x", "name": 1}), InvalidMessage, "name"),
    ("bad-meta", _append({**USER, "content": "x"}, meta=["x"]), InvalidMessage, "meta"),
    ("bad-at-text", _append({**USER, "content": "x"}, at="yesterday"), InvalidMessage, "at"),
    ("bad-at-type", _append({**USER, "content": "x"}, at=[2024]), InvalidMessage, "at"),
    ("at-huge-epoch", _append({**USER, "content": "x"}, at=1e20), InvalidMessage, "at"),
    ("at-before-year-1", _append({**USER, "content": "x"}, at=-1e15), InvalidMessage, "at"),
    (
        "at-after-9999-in-utc",
        _append({**USER, "content": "x"}, at="9999-12-31T23:59:59-01:00"),
        InvalidMessage,
        "at",
    ),
    (
        "function-at-out-of-range",
        lambda g, ids: g.function("f", at=10**30).__enter__(),
        InvalidMessage,
        "at",
    ),
    # these two run with the head forked into the finished function (see INSIDE_FINISHED)
    (
        "append-in-finished-function",
        _append({**USER, "content": "late"}),
        FunctionFinished,
        "'finished'",
    ),
    ("function-in-finished-function", _function, FunctionFinished, "'finished'"),
    ("fork-other-session", _fork_other, CrossSessionError, "'other'"),
    ("fork-tool-node", _fork_tool, GraphError, "tool node"),
]


INSIDE_FINISHED = {"append-in-finished-function", "function-in-finished-function"}


@pytest.mark.parametrize(("case", "action", "error", "detail"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_and_stores_nothing(
    url: str, case: str, action: Callable[..., Any], error: type, detail: str
) -> None:
    g, ids = _build(url)
    if case in INSIDE_FINISHED:
        g.fork(ids["inner"])  # a legal write: the head now lies inside a finished function
    before = graph_state(g)
    stored_before = stored_state(url, "main")
    other_before = stored_state(url, "other")
    assert stored_before == before  # a fresh handle reads what the live one holds

    with pytest.raises(error) as raised:
        action(g, ids)

    assert isinstance(raised.value, GraphError)
    if isinstance(raised.value, InvalidMessage):
        assert raised.value.field == detail
        assert str(raised.value).startswith(f"invalid message: {detail}: ")
    else:
        assert detail in str(raised.value)
    assert graph_state(g) == before
    assert stored_state(url, "main") == stored_before
    assert stored_state(url, "other") == other_before
    # and the graph still takes good input afterwards
    if case not in INSIDE_FINISHED:
        g.append({"role": "tool", "tool_call_id": "open", "content": "late result"})
        assert g.last_seq == before["last_seq"] + 1
    g.close()
