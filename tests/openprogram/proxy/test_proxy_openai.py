"""OpenAI Chat Completions through the proxy with the official ``openai`` SDK (sync,
async, streaming; tools and parallel calls) and with litellm, against a scripted upstream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from _scripted_upstream import calls, text

from context import TokenCounter, tool_pair_problems

KEY = "sk-proj-proxy-test-key-abcdefghijklmnop0123"
TOOLS = [
    {"type": "function", "function": {"name": "read_file", "description": "Read a file",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
]  # fmt: skip


@pytest.fixture
def gpt(running: Any) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=running.openai_base, api_key=KEY, max_retries=0) as c:
        yield c


def test_parallel_tool_calls_come_back_and_their_results_go_up(
    running: Any, gpt: openai.OpenAI
) -> None:
    running.upstream.script = lambda protocol, body: calls(
        ("read_file", {"path": "a.py"}), ("read_file", {"path": "b.py"})
    )
    messages: list[Any] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "read both"},
    ]
    reply = gpt.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
    message = reply.choices[0].message
    assert [json.loads(c.function.arguments)["path"] for c in message.tool_calls or ()] == [
        "a.py",
        "b.py",
    ]  # type: ignore[union-attr]
    assert reply.usage is not None and reply.usage.prompt_tokens_details.cached_tokens == 7  # type: ignore[union-attr]
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls or ():
        messages.append(
            {"role": "tool", "tool_call_id": call.id, "content": f"contents of {call.id}"}
        )
    running.upstream.script = lambda protocol, body: text("both read")
    final = gpt.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
    assert final.choices[0].message.content == "both read"
    sent = running.upstream.bodies("/v1/chat/completions")[-1]
    assert sent["messages"] == json.loads(json.dumps(messages))
    assert tool_pair_problems(sent["messages"]) == []


def test_streaming_tool_calls_pass_through_in_order(running: Any, gpt: openai.OpenAI) -> None:
    running.upstream.script = lambda protocol, body: [
        *text("sure"),
        *calls(("read_file", {"path": "x"}), ("read_file", {"path": "y"})),
    ]
    stream = gpt.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "go"}], tools=TOOLS,  # type: ignore[list-item]
        stream=True, stream_options={"include_usage": True},
    )  # fmt: skip
    chunks = list(stream)
    said = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    names = [
        t.index for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or () if t.id
    ]
    assert said == "sure" and names == [0, 1]
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens > 0
    (record,) = [r for r in running.proxy.records() if r["protocol"] == "openai"]
    assert record["usage"]["cache_read"] == 7 and record["usage"]["output"] == 5


def test_async_and_async_streaming(running: Any) -> None:
    async def go() -> tuple[str | None, str]:
        async with openai.AsyncOpenAI(
            base_url=running.openai_base, api_key=KEY, max_retries=0
        ) as c:
            plain = await c.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "a"}]
            )
            stream = await c.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "b"}], stream=True
            )
            said = "".join(
                [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
            )
            return plain.choices[0].message.content, said

    assert asyncio.run(go()) == ("ok, done", "ok, done")


def test_a_long_history_goes_up_compacted_within_budget(running: Any, gpt: openai.OpenAI) -> None:
    counter = TokenCounter("gpt-4o")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You fix bugs."},
        {"role": "user", "content": "Fix calc.py"},
    ]
    for n in range(30):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{n}", "type": "function", "function": {"name": "read_file", "arguments": json.dumps({"path": f"m{n}.py"})}}]})  # fmt: skip
        messages.append(
            {
                "role": "tool",
                "tool_call_id": f"call_{n}",
                "content": f"def f{n}():\n" + "    pass  # body\n" * 60,
            }
        )
    messages.append({"role": "user", "content": "Now run the tests, please."})
    assert counter.count_messages(messages) > 8_000
    gpt.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
    sent = running.upstream.bodies("/v1/chat/completions")[-1]
    assert counter.count_messages(sent["messages"]) + counter.count_tools(TOOLS) <= 4_000
    assert tool_pair_problems(sent["messages"]) == []
    assert sent["messages"][0] == messages[0] and sent["messages"][-1] == messages[-1]


def test_litellm_through_the_proxy_on_both_protocols(running: Any) -> None:
    import litellm

    running.upstream.script = lambda protocol, body: text(f"hello from {protocol}")
    said = litellm.completion(model="openai/gpt-4o", api_base=running.openai_base, api_key=KEY,
                              messages=[{"role": "user", "content": "hi"}])  # fmt: skip
    assert said.choices[0].message.content == "hello from openai"
    claude = litellm.completion(model="anthropic/claude-sonnet-4-5", api_base=running.anthropic_base,
                                api_key=KEY, messages=[{"role": "user", "content": "hi"}])  # fmt: skip
    assert claude.choices[0].message.content == "hello from anthropic"
    streamed = litellm.completion(model="openai/gpt-4o", api_base=running.openai_base, api_key=KEY,
                                  messages=[{"role": "user", "content": "hi"}], stream=True)  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in streamed) == "hello from openai"
    assert {r["event"] for r in running.proxy.records()} == {"sent"}
