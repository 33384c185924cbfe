"""Shared helpers for the graph tests (imported as a top-level module under ``prepend``)."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from graph import ConversationGraph, GraphReader

_ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def stable_ids(value: Any) -> Any:
    """``value`` with every node id replaced by ``<id1>``, ``<id2>``… in order of appearance."""
    text = json.dumps(value, sort_keys=False)
    names: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return names.setdefault(match.group(0), f"<id{len(names) + 1}>")

    return json.loads(_ULID.sub(rename, text))


def check_tool_pairs(messages: list[dict[str, Any]]) -> None:
    """Assert OpenAI tool pairing: each tool message answers a call of the nearest preceding
    assistant (once), and every call is answered before the next non-tool message."""
    open_calls: set[str] | None = None
    answered: set[str] = set()
    for index, message in enumerate(messages):
        if message["role"] == "tool":
            assert open_calls is not None, f"message {index}: tool message without an assistant"
            call_id = message["tool_call_id"]
            assert call_id in open_calls, f"message {index}: {call_id!r} answers no open call"
            assert call_id not in answered, f"message {index}: {call_id!r} answered twice"
            answered.add(call_id)
            continue
        if open_calls is not None:
            missing = open_calls - answered
            assert not missing, f"message {index}: calls {sorted(missing)} left unanswered"
        open_calls = None
        answered = set()
        calls = message.get("tool_calls")
        if calls:
            assert message["role"] == "assistant"
            ids = [c["id"] for c in calls]
            assert len(ids) == len(set(ids)), f"message {index}: duplicate call ids {ids}"
            open_calls = set(ids)
    if open_calls is not None:
        missing = open_calls - answered
        assert not missing, f"calls {sorted(missing)} left unanswered at the end"


def graph_state(g: GraphReader) -> dict[str, Any]:
    """Everything a reader exposes, for comparing two readers of one session."""
    state: dict[str, Any] = {
        "nodes": g.nodes(),
        "edges": list(g.state.edges),
        "events": g.events(),
        "last_seq": g.last_seq,
        "openai": g.to_openai(),
    }
    if isinstance(g, ConversationGraph):
        state["head"] = g.head
        state["frame"] = g.frame
    return state


def stored_state(url: str, session: str) -> dict[str, Any]:
    """The session as a fresh handle reads it from the store."""
    reopened = ConversationGraph.open(url, session=session)
    try:
        return graph_state(reopened)
    finally:
        reopened.close()


def payload_bytes(g: GraphReader) -> dict[str, bytes]:
    """Each node's payload and meta as JSON bytes (they must never change)."""
    return {n.id: msgspec.json.encode([n.payload, n.meta, n.at, n.seq]) for n in g.nodes()}


def call(call_id: str, name: str = "lookup", arguments: Any = "{}") -> dict[str, Any]:
    """One entry of an assistant's ``tool_calls``."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
