"""Anthropic Messages through the proxy, with the official ``anthropic`` SDK (sync, async,
streaming) against a scripted upstream: the request that goes upstream is the render, and
what comes back is the provider's answer, unchanged."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from _proxy_checks import anthropic_pair_problems, anthropic_tokens, holds, last_user_text
from _scripted_upstream import calls, text

from openprogram import HISTORY_TOOLS
from openprogram.proxy import Proxy, ProxyConfig

TOOLS = [
    {
        "name": "Read",
        "description": "Read a file",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
    {
        "name": "Bash",
        "description": "Run a command",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
]
KEY = "sk-ant-api03-proxy-test-key-0123456789abcdef"


@pytest.fixture
def claude(running: Any) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=running.anthropic_base, api_key=KEY, max_retries=0) as c:
        yield c


def test_a_message_goes_upstream_and_the_answer_comes_back(
    running: Any, claude: anthropic.Anthropic
) -> None:
    running.upstream.script = lambda protocol, body: calls(("Read", {"path": "a.py"}))
    reply = claude.messages.create(
        model="claude-sonnet-4-5", max_tokens=64, system="Be brief.", tools=TOOLS,
        messages=[{"role": "user", "content": "read a.py"}],
    )  # fmt: skip
    assert reply.stop_reason == "tool_use"
    assert reply.content[0].type == "tool_use" and reply.content[0].input == {"path": "a.py"}
    assert reply.usage.cache_read_input_tokens == 7
    (sent,) = running.upstream.bodies()
    assert sent["messages"] == [{"role": "user", "content": "read a.py"}]
    assert sent["system"] == "Be brief." and sent["tools"][: len(TOOLS)] == TOOLS
    assert {t["name"] for t in sent["tools"][len(TOOLS) :]} == set(HISTORY_TOOLS)  # ours
    assert any(KEY in value for value in running.upstream.seen[0].headers.values())  # forwarded


def test_streaming_passes_every_event_in_order(running: Any, claude: anthropic.Anthropic) -> None:
    running.upstream.script = lambda protocol, body: [
        {"type": "thinking", "thinking": "let me see", "signature": "sig-abc=="},
        *text("hello there"),
        *calls(("Bash", {"command": "ls"})),
    ]
    with claude.messages.stream(
        model="claude-sonnet-4-5", max_tokens=64, tools=TOOLS,
        messages=[{"role": "user", "content": "hi"}],
    ) as stream:  # fmt: skip
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert [b.type for b in final.content] == ["thinking", "text", "tool_use"]
    assert final.content[0].signature == "sig-abc=="
    assert final.content[1].text == "hello there"
    assert final.usage.output_tokens == 5


def test_async_and_async_streaming(running: Any) -> None:
    async def go() -> tuple[str, str]:
        async with anthropic.AsyncAnthropic(
            base_url=running.anthropic_base, api_key=KEY, max_retries=0
        ) as c:
            plain = await c.messages.create(model="claude-sonnet-4-5", max_tokens=16,
                                            messages=[{"role": "user", "content": "one"}])  # fmt: skip
            async with c.messages.stream(model="claude-sonnet-4-5", max_tokens=16,
                                         messages=[{"role": "user", "content": "two"}]) as s:  # fmt: skip
                said = await s.get_final_text()
            return plain.content[0].text, said  # type: ignore[union-attr]

    assert asyncio.run(go()) == ("ok, done", "ok, done")


def _conversation(turns: int, *, big: int) -> list[dict[str, Any]]:
    """A Claude-Code-like history: each turn a thinking block, a tool call, a long result."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "Fix the failing test in calc.py"}]}
    ]
    for n in range(turns):
        messages.append({"role": "assistant", "content": [
            {"type": "thinking", "thinking": f"step {n}", "signature": f"sig-{n}=="},
            {"type": "tool_use", "id": f"toolu_{n:03d}", "name": "Read", "input": {"path": f"src/mod_{n}.py"}},
        ]})  # fmt: skip
        result = f"def fn_{n}(x):\n" + f"    return x + {n}  # line\n" * big
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{n:03d}", "content": result}
                ],
            }
        )
    return messages


def test_a_long_history_goes_up_compacted_within_budget(
    running: Any, claude: anthropic.Anthropic
) -> None:
    c = claude
    history = _conversation(30, big=60)
    system = [
        {
            "type": "text",
            "text": "You are a coding agent.",
            "cache_control": {"type": "ephemeral", "ttl": "1h"},
        }
    ]
    for n in range(10, 31, 5):
        request = history[: 1 + 2 * n]
        request = [*request[:-1], {"role": "user", "content": [
            *request[-1]["content"],
            {"type": "text", "text": f"Now look at step {n}, please.", "cache_control": {"type": "ephemeral"}},
        ]}]  # fmt: skip
        c.messages.create(
            model="claude-sonnet-4-5", max_tokens=64, system=system, tools=TOOLS, messages=request
        )  # type: ignore[arg-type]
        sent = running.upstream.bodies()[-1]
        assert anthropic_tokens(sent) <= 4_000, n
        assert anthropic_pair_problems(sent) == [], n
        assert last_user_text(sent) == f"Now look at step {n}, please."
        assert sent["messages"][-1] == request[-1]  # the current request, byte for byte
        assert sent["system"] == system  # its breakpoint and ttl kept
        marks = [
            b
            for m in sent["messages"]
            for b in m["content"]
            if isinstance(b, dict) and "cache_control" in b
        ]
        assert marks[-1]["cache_control"] == {"type": "ephemeral"}
    assert anthropic_tokens({"system": system, "tools": TOOLS, "messages": request}) > 8_000
    for message in sent["messages"]:  # a kept assistant turn keeps its thinking, signed
        if message["role"] == "assistant" and message in request:
            assert message["content"][0]["type"] == "thinking"
            assert message["content"][0]["signature"].startswith("sig-")
    records = [r for r in running.proxy.records() if r["event"] == "sent"]
    assert len(records) == 5 and all(r["tokens"] <= r["budget"] for r in records)


def test_at_most_four_breakpoints_go_upstream(running: Any, claude: anthropic.Anthropic) -> None:
    mark = {"type": "ephemeral", "ttl": "5m"}
    messages = []
    for n in range(6):
        messages.append(
            {"role": "user", "content": [{"type": "text", "text": f"q{n}", "cache_control": mark}]}
        )
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"a{n}"}]})
    messages.append(
        {"role": "user", "content": [{"type": "text", "text": "last", "cache_control": mark}]}
    )
    system = [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    claude.messages.create(
        model="claude-sonnet-4-5", max_tokens=8, system=system, messages=messages
    )  # type: ignore[arg-type]
    sent = running.upstream.bodies()[-1]
    marked = [b for m in sent["messages"] for b in m["content"] if "cache_control" in b]
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert len(marked) == 3 and [b["text"] for b in marked] == ["q4", "q5", "last"]
    assert all(b["cache_control"] == mark for b in marked)
    assert "cache_control" in messages[0]["content"][0]  # the client's own untouched


def test_beta_query_and_header_pass_on(running: Any, claude: anthropic.Anthropic) -> None:
    claude.beta.messages.create(
        model="claude-sonnet-4-5", max_tokens=8, betas=["context-management-2025-06-27"],
        extra_query={"beta": "true"},
        messages=[{"role": "user", "content": "hi"}],
    )  # fmt: skip
    seen = running.upstream.seen[-1]
    assert seen.headers["anthropic-beta"] == "context-management-2025-06-27"
    assert (seen.path, seen.query) == ("/v1/messages", "beta=true")


def test_count_tokens_counts_the_request_as_it_would_be_sent(
    running: Any, claude: anthropic.Anthropic
) -> None:
    c = claude
    history = _conversation(30, big=60)
    counted = c.messages.count_tokens(
        model="claude-sonnet-4-5", system="sys", tools=TOOLS, messages=history
    )  # type: ignore[arg-type]
    (sent,) = running.upstream.bodies("/v1/messages/count_tokens")
    assert anthropic_tokens(sent) <= 4_000
    assert counted.input_tokens == max(1, len(json.dumps(sent)) // 4)
    assert running.proxy.store.sessions() == []  # counting stores nothing


def test_models_pass_through(running: Any, claude: anthropic.Anthropic) -> None:
    page = claude.models.list()
    assert [m.id for m in page.data] == ["claude-fake-1"]
    assert running.upstream.seen[-1].path == "/v1/models"


@pytest.mark.parametrize("path", ["/v1/messages", "/wrong/v1/messages", "/"])
def test_a_request_without_the_token_is_refused(running: Any, path: str) -> None:
    import httpx

    answer = httpx.post(
        running.url + path, json={"model": "m", "messages": []}, headers={"x-api-key": KEY}
    )
    assert answer.status_code == 403 and "token" in answer.json()["error"]["message"]
    assert running.upstream.seen == []


def test_a_foreign_host_is_refused(running: Any) -> None:
    import httpx

    answer = httpx.post(
        running.anthropic_base + "/v1/messages", json={}, headers={"host": "evil.example:80"}
    )
    assert answer.status_code == 403 and "Host" in answer.json()["error"]["message"]
    assert running.upstream.seen == []


def test_the_sessions_store_only_what_is_new(running: Any, claude: anthropic.Anthropic) -> None:
    c = claude
    history = _conversation(6, big=2)
    c.messages.create(model="claude-sonnet-4-5", max_tokens=8, tools=TOOLS, messages=history[:5])  # type: ignore[arg-type]
    (info,) = running.proxy.store.sessions()
    c.messages.create(model="claude-sonnet-4-5", max_tokens=8, tools=TOOLS, messages=history)  # type: ignore[arg-type]
    (after,) = running.proxy.store.sessions()
    assert after.id == info.id
    # Four more turns, each an assistant node and its tool node (the result fills it): the
    # first five messages are not stored again
    assert (info.nodes, after.nodes - info.nodes) == (5, 8)
    assert holds(running.upstream.bodies()[-1], "src/mod_5.py")


@pytest.mark.parametrize("budget", [12_000, 14_000])
def test_the_newest_marks_are_kept_where_compaction_joined_a_message_to_its_parts(
    tmp_path: Path, budget: int
) -> None:
    """The marks are looked for only in the messages that hold one of the client's: a
    message whose result compaction cleared, sent with the client's marked text, is one
    of them; the three newest such marks go up, the older ones lose theirs."""
    history = _conversation(24, big=60)
    for n, message in enumerate(history):
        if message["role"] == "user" and n % 4 == 2:  # a marked note beside a result
            note = {"type": "text", "text": f"note {n}", "cache_control": {"type": "ephemeral"}}
            message["content"] = [*message["content"], note]
    system = [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 8, "system": system, "tools": TOOLS,
            "messages": history}  # fmt: skip
    proxy = Proxy(ProxyConfig(db=":memory:", state_dir=str(tmp_path / "s"), budget=budget))
    try:
        prepared = proxy.prepare("anthropic", {}, json.dumps(body).encode())
    finally:
        proxy.close()
    assert prepared.event == "sent", prepared.reason
    sent = json.loads(prepared.body)
    blocks = [b for m in sent["messages"] for b in m["content"] if isinstance(b, dict)]
    notes = [b["text"] for b in blocks if str(b.get("text", "")).startswith("note ")]
    marked = [b.get("text") for b in blocks if "cache_control" in b]
    assert len(notes) > 3 and sent["system"] == system
    assert marked == notes[-3:]
    joined = [  # a result compaction made, sent in one message with the client's note
        m for m in sent["messages"]
        if any(b.get("type") == "tool_result" and "def fn_" not in str(b["content"]) for b in m["content"])
        and any(str(b.get("text", "")).startswith("note ") for b in m["content"])
    ]  # fmt: skip
    assert joined
