"""Each conversation is a session: recognised by the client's own id and a fingerprint of
the conversation, or named by the client; Claude Code's side calls pass through untouched."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from graph import ConversationGraph

TOOLS = [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}]
CC_ID = "5f1c2a9e-8d7b-4c3a-9e21-0a1b2c3d4e5f"


@pytest.fixture
def claude(running: Any) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=running.anthropic_base, api_key="k", max_retries=0) as c:
        yield c


def _ask(
    c: anthropic.Anthropic,
    first: str,
    *more: str,
    system: str = "sys",
    headers: dict[str, str] | None = None,
    metadata: dict[str, str] | None = None,
    tools: Any = TOOLS,
    model: str = "claude-sonnet-4-5",
) -> None:
    messages: list[Any] = [{"role": "user", "content": first}]
    for text in more:
        messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": text}]
    extra: dict[str, Any] = {"metadata": metadata} if metadata else {}
    c.messages.create(model=model, max_tokens=8, system=system, tools=tools, messages=messages,
                      extra_headers=headers or {}, **extra)  # fmt: skip


def _sessions(running: Any) -> dict[str, list[str]]:
    """Each session's user messages."""
    store = running.proxy.store
    return {
        info.id: [
            str(n.payload.content)
            for n in ConversationGraph(store, info.id).nodes()
            if n.role == "user"
        ]
        for info in store.sessions()
    }


def test_a_conversation_that_goes_on_is_one_session(
    running: Any, claude: anthropic.Anthropic
) -> None:
    _ask(claude, "task A")
    _ask(claude, "task A", "more A")
    _ask(claude, "task B")
    assert sorted(_sessions(running).values()) == [["task A", "more A"], ["task B"]]


@pytest.mark.parametrize("how", ["header", "metadata-json", "metadata-legacy"])
def test_claude_codes_session_id_with_the_fingerprint_keys_a_session(
    running: Any, claude: anthropic.Anthropic, how: str
) -> None:
    headers = {"X-Claude-Code-Session-Id": CC_ID} if how == "header" else {}
    user_id = {"metadata-json": json.dumps({"device_id": "d", "session_id": CC_ID}),
               "metadata-legacy": f"user_abc123_account__session_{CC_ID}"}.get(how)  # fmt: skip
    metadata = {"user_id": user_id} if user_id else None
    _ask(claude, "main task", headers=headers, metadata=metadata)
    _ask(claude, "main task", "go on", headers=headers, metadata=metadata)
    _ask(claude, "subagent task", system="subagent system", headers=headers, metadata=metadata)
    _ask(claude, "main task", headers={}, metadata=None)  # the same words, no id: another
    sessions = _sessions(running)
    assert sorted(sessions.values()) == [["main task"], ["main task", "go on"], ["subagent task"]]
    cc = [r for r in running.proxy.records() if r["event"] == "sent"]
    assert len({r["session"] for r in cc}) == 3


def test_a_client_names_its_session(running: Any, claude: anthropic.Anthropic) -> None:
    _ask(claude, "one", headers={"X-OpenProgram-Session": "my-agent-1"})
    _ask(claude, "two", headers={"X-OpenProgram-Session": "my-agent-1"})
    assert _sessions(running) == {"my-agent-1": ["one", "two"]}
    assert "x-openprogram-session" not in running.upstream.seen[-1].headers  # ours, not sent on


def test_side_calls_pass_through_untouched_with_a_record(
    running: Any, claude: anthropic.Anthropic
) -> None:
    headers = {"X-Claude-Code-Session-Id": CC_ID}
    _ask(claude, "Write a title for: fix the bug", headers=headers, tools=anthropic.NOT_GIVEN)
    _ask(claude, "quota", headers=headers, model="claude-haiku-4-5")
    assert running.proxy.store.sessions() == []
    bodies = running.upstream.bodies()
    assert bodies[0]["messages"] == [{"role": "user", "content": "Write a title for: fix the bug"}]
    assert "tools" not in bodies[0]
    records = running.proxy.records()
    assert [(r["event"], r["reason"]) for r in records] == [
        ("side-call", "side call: no tools"), ("side-call", "side call: small model claude-haiku-4-5")]  # fmt: skip
    assert all(r["status"] == 200 and r["usage"]["cache_read"] == 7 for r in records)
