"""Appending OpenAI messages: dialogue nodes, tool nodes, content parts, meta and time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from _graph_helpers import call, check_tool_pairs, stable_ids
from inline_snapshot import snapshot

from graph import ConversationGraph, Dialogue, Tool, ToolResult


def test_dialogue_roles_become_a_chain() -> None:
    g = ConversationGraph.memory()
    system = g.append({"role": "system", "content": "be brief"})
    user = g.append({"role": "user", "content": "hi", "name": "ann"})
    assistant = g.append({"role": "assistant", "content": "hello"})

    assert [n.id for n in g.nodes()] == [system.id, user.id, assistant.id]
    assert [n.seq for n in g.nodes()] == [1, 2, 3]
    assert [n.kind for n in g.nodes()] == ["dialogue"] * 3
    assert [n.role for n in g.nodes()] == ["system", "user", "assistant"]
    assert user.payload == Dialogue(role="user", content="hi", name="ann")
    assert g.head == assistant.id
    assert g.predecessor(assistant.id) == user
    assert g.predecessor(system.id) is None
    assert g.caller(user.id) is None
    assert [(e.src, e.dst, e.type) for e in g.state.edges] == [
        (system.id, user.id, "next"),
        (user.id, assistant.id, "next"),
    ]
    assert g.to_openai() == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi", "name": "ann"},
        {"role": "assistant", "content": "hello"},
    ]
    assert len(g) == 3 and user.id in g and "nope" not in g


def test_parallel_tool_calls_create_tool_nodes_in_request_order() -> None:
    g = ConversationGraph.memory()
    g.append({"role": "user", "content": "weather in two cities"})
    calls = [call("c1", "weather", {"city": "Oslo"}), call("c2", "weather", '{"city": "Rome"}')]
    calls.append(call("c3", "clock"))
    assistant = g.append({"role": "assistant", "content": None, "tool_calls": calls})

    tools = g.tools(assistant.id)
    assert [t.payload for t in tools] == [
        Tool(name="weather", arguments='{"city": "Oslo"}', call_id="c1"),
        Tool(name="weather", arguments='{"city": "Rome"}', call_id="c2"),
        Tool(name="clock", arguments="{}", call_id="c3"),
    ]
    assert [t.kind for t in tools] == ["tool"] * 3
    assert [t.status for t in tools] == ["pending"] * 3
    assert [t.seq for t in tools] == [assistant.seq + 1, assistant.seq + 2, assistant.seq + 3]
    assert g.head == assistant.id  # tool nodes hang off the assistant, they are not heads
    assert all(g.predecessor(t.id) is None for t in tools)
    requested = [(e.src, e.dst) for e in g.state.edges if e.type == "requested"]
    assert requested == [(assistant.id, t.id) for t in tools]

    # results arrive in any order and fill the matching node
    third = g.append({"role": "tool", "tool_call_id": "c3", "content": "12:00"})
    first = g.append({"role": "tool", "tool_call_id": "c1", "content": "rain", "is_error": True})
    assert third.id == tools[2].id and first.id == tools[0].id
    assert first.result == ToolResult(content="rain", is_error=True)
    assert [t.status for t in g.tools(assistant.id)] == ["done", "pending", "done"]
    assert [e.type for e in g.events()] == ["result", "result"]
    assert [e.node_id for e in g.events()] == [tools[2].id, tools[0].id]

    messages = g.to_openai()
    check_tool_pairs(messages)
    # results render right after their assistant, in request order, pending ones as placeholders
    assert [m.get("tool_call_id") for m in messages[2:]] == ["c1", "c2", "c3"]
    assert messages[3]["content"] == "[no result yet: tool call c2 is still running]"

    g.append({"role": "tool", "tool_call_id": "c2", "content": "sun"})
    g.append({"role": "assistant", "content": "Oslo rain, Rome sun"})
    check_tool_pairs(g.to_openai())
    assert [m["role"] for m in g.to_openai()] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "assistant",
    ]


def test_to_openai_snapshot_of_a_small_graph() -> None:
    g = ConversationGraph.memory()
    g.append({"role": "system", "content": "You fix bugs."})
    g.append({"role": "user", "content": "Find the bug"})
    g.append(
        {
            "role": "assistant",
            "content": "Let me look.",
            "thinking": "grep first",
            "tool_calls": [call("call_a", "grep", {"pattern": "parse"}), call("call_b", "ls")],
        }
    )
    g.append({"role": "tool", "tool_call_id": "call_b", "content": "a.py b.py"})
    g.append({"role": "tool", "tool_call_id": "call_a", "content": "a.py:3: def parse"})
    with g.function("review", input={"file": "a.py"}) as fn:
        g.append({"role": "assistant", "content": "parse() drops the last line"})
        fn.output = "off-by-one in parse()"
    g.append({"role": "assistant", "content": "Fixed."})

    messages = g.to_openai()
    check_tool_pairs(messages)
    assert stable_ids(messages) == snapshot(
        [
            {"role": "system", "content": "You fix bugs."},
            {"role": "user", "content": "Find the bug"},
            {
                "role": "assistant",
                "content": "Let me look.",
                "thinking": "grep first",
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "grep", "arguments": '{"pattern": "parse"}'},
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "ls", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": "a.py:3: def parse"},
            {"role": "tool", "tool_call_id": "call_b", "content": "a.py b.py"},
            {"role": "assistant", "content": "parse() drops the last line"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "fn_8",
                        "type": "function",
                        "function": {"name": "review", "arguments": '{"input": {"file": "a.py"}}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "fn_8", "content": "off-by-one in parse()"},
            {"role": "assistant", "content": "Fixed."},
        ]
    )


def test_content_parts_round_trip() -> None:
    g = ConversationGraph.memory()
    parts = [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
        {"type": "text", "text": "and this?"},
    ]
    node = g.append({"role": "user", "content": parts})
    assert isinstance(node.payload, Dialogue)
    assert node.payload.content == parts
    assert g.to_openai() == [{"role": "user", "content": parts}]
    assert g.to_openai()[0]["content"] is not parts  # the caller's list is not kept


def test_thinking_is_kept() -> None:
    g = ConversationGraph.memory()
    g.append({"role": "user", "content": "2+2?"})
    a = g.append({"role": "assistant", "content": "4", "thinking": "simple sum"})
    b = g.append({"role": "assistant", "content": "yes", "reasoning_content": "double check"})
    assert isinstance(a.payload, Dialogue) and a.payload.thinking == "simple sum"
    assert isinstance(b.payload, Dialogue) and b.payload.thinking == "double check"
    assert g.to_openai()[1:] == [
        {"role": "assistant", "content": "4", "thinking": "simple sum"},
        {"role": "assistant", "content": "yes", "thinking": "double check"},
    ]


def test_tool_result_with_content_parts() -> None:
    g = ConversationGraph.memory()
    g.append({"role": "assistant", "content": None, "tool_calls": [call("shot", "screenshot")]})
    parts = [{"type": "image_url", "image_url": {"url": "https://example.invalid/a.png"}}]
    tool = g.append({"role": "tool", "tool_call_id": "shot", "content": parts})
    assert tool.result == ToolResult(content=parts)
    assert g.to_openai()[1] == {"role": "tool", "tool_call_id": "shot", "content": parts}


@pytest.mark.parametrize(
    ("at", "expected"),
    [
        (datetime(2024, 5, 1, 12, 30, 1, 250000, tzinfo=UTC), "2024-05-01T12:30:01.250000+00:00"),
        (datetime(2024, 5, 1, 12, 30), "2024-05-01T12:30:00+00:00"),  # naive means UTC
        (
            datetime(2024, 5, 1, 14, 30, tzinfo=timezone(timedelta(hours=2))),
            "2024-05-01T12:30:00+00:00",
        ),
        ("2024-05-01T12:30:00Z", "2024-05-01T12:30:00+00:00"),
        ("2024-05-01T12:30:00.5+02:00", "2024-05-01T10:30:00.500000+00:00"),
        (1714566600.5, "2024-05-01T12:30:00.500000+00:00"),
        (1714566600, "2024-05-01T12:30:00+00:00"),
    ],
    ids=["aware", "naive", "offset", "iso-z", "iso-offset", "epoch-float", "epoch-int"],
)
def test_at_is_normalized_to_utc(at: object, expected: str, tmp_path: object) -> None:
    g = ConversationGraph.memory()
    node = g.append({"role": "user", "content": "x"}, at=at)
    assert node.at.isoformat() == expected
    assert node.at.tzinfo is not None and node.at.utcoffset() == timedelta(0)


def test_meta_and_at_round_trip_through_sqlite(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/meta.db"
    meta = {"model": "gpt-x", "usage": {"in": 12, "out": 3}, "tags": ["a", "b"], "ok": True}
    g = ConversationGraph.open(url, session="meta")
    user = g.append({"role": "user", "content": "x"}, at="2024-01-02T03:04:05.123456Z", meta=meta)
    with g.function("f", at=1704164645.0, meta={"why": "test"}) as fn:
        pass
    g.close()

    again = ConversationGraph.open(url, session="meta")
    assert again.get(user.id).meta == meta
    assert again.get(user.id).at == datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    assert again.get(fn.id).meta == {"why": "test"}
    assert again.get(fn.id).at == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert again.nodes() == g.nodes()
    again.close()


def test_meta_is_normalized_like_the_store() -> None:
    g = ConversationGraph.memory()
    when = datetime(2024, 1, 1, tzinfo=UTC)
    node = g.append({"role": "user", "content": "x"}, meta={"when": when, "pair": (1, 2)})
    # what a store gives back: JSON types only
    assert node.meta == {"when": "2024-01-01T00:00:00Z", "pair": [1, 2]}


def test_tool_calls_on_an_assistant_with_text() -> None:
    g = ConversationGraph.memory()
    a = g.append(
        {"role": "assistant", "content": "checking", "tool_calls": [call("x1", "f", None)]}
    )
    assert [t.payload.arguments for t in g.tools(a.id) if isinstance(t.payload, Tool)] == ["{}"]
    assert g.to_openai()[0]["tool_calls"] == [
        {"id": "x1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    ]
