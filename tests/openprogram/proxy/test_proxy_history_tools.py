"""History tools answered inside the proxy: the model calls ``search_history``, the proxy
answers it from the session and continues upstream, and the client reads one answer with
only its own tools in it (Anthropic Messages and OpenAI Responses, streamed and not).
Checked from the bytes the client gets, and through the official SDKs."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from _scripted_upstream import ScriptedUpstream, calls, stop_server, text
from conftest import Running, start_proxy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

KEY = "sk-ant-api03-proxy-test-key-0123456789abcdef"
READ = {"name": "Read", "description": "Read a file",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}  # fmt: skip
READ_FN = {"type": "function", "name": "Read", "description": "Read a file",
           "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}  # fmt: skip
HISTORY = [
    {"role": "user", "content": "Where did we put the zebra config?"},
    {"role": "assistant", "content": "It is in conf/zebra.toml, next to the llama notes."},
    {"role": "user", "content": "Open it, please."},
]
FIRST = [
    {"type": "thinking", "thinking": "I should look back", "signature": "sig-one=="},
    *text("Let me check."),
]
SECOND = [
    {"type": "thinking", "thinking": "found the path", "signature": "sig-two=="},
    *text("It is conf/zebra.toml."),
    *calls(("Read", {"path": "conf/zebra.toml"})),
]


def looks_back(protocol: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Search first; once the search's result is in the request, answer with the client's tool."""
    if "zebra" in json.dumps(body.get("messages", body.get("input")))[-2000:] and _answered(body):
        return SECOND
    return [*FIRST, *calls(("search_history", {"query": "zebra"}))]


def _answered(body: dict[str, Any]) -> bool:
    said = json.dumps(body.get("messages") or body.get("input"))
    return any(mark in said for mark in ("tool_result", "function_call_output", '"role": "tool"'))


@pytest.fixture
def history(upstream: ScriptedUpstream, tmp_path: Path) -> Iterator[Running]:
    upstream.script = looks_back
    run, handle = start_proxy(upstream, tmp_path / "p.db", budget=8_000)
    yield run
    stop_server(*handle)  # type: ignore[misc]
    run.proxy.close()


def events_of(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in raw.split(b"\n") if line.startswith(b"data:")]


def post(url: str, body: dict[str, Any], headers: dict[str, str]) -> bytes:
    with httpx.stream("POST", url, json=body, headers=headers, timeout=30) as answer:
        assert answer.status_code == 200
        return b"".join(answer.iter_raw())


ANTHROPIC = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
ASK = {"model": "claude-sonnet-4-5", "max_tokens": 64, "tools": [READ], "messages": HISTORY}


def test_anthropic_stream_is_one_message_without_the_proxys_tool(history: Running) -> None:
    raw = post(history.anthropic_base + "/v1/messages", {**ASK, "stream": True}, ANTHROPIC)
    events = events_of(raw)
    kinds = [e["type"] for e in events]
    assert kinds.count("message_start") == 1 and kinds[-1] == "message_stop"
    assert kinds.count("message_delta") == 1 and b"search_history" not in raw
    starts = [e for e in events if e["type"] == "content_block_start"]
    assert [e["index"] for e in starts] == list(range(5))
    assert [e["content_block"]["type"] for e in starts] == [
        "thinking",
        "text",
        "thinking",
        "text",
        "tool_use",
    ]
    for e in events:
        if "index" in e:
            assert 0 <= e["index"] < 5
    signatures = [
        e["delta"]["signature"]
        for e in events
        if e.get("delta", {}).get("type") == "signature_delta"
    ]
    assert signatures == ["sig-one==", "sig-two=="]
    first, second = history.upstream.bodies()
    start = next(e for e in events if e["type"] == "message_start")["message"]["usage"]
    (delta,) = [e for e in events if e["type"] == "message_delta"]
    inputs = [max(1, len(json.dumps(b)) // 4) for b in (first, second)]
    assert delta["usage"]["input_tokens"] == sum(inputs) and start["input_tokens"] == inputs[0]
    assert delta["usage"]["output_tokens"] == 10 and delta["usage"]["cache_read_input_tokens"] == 14
    assert delta["delta"]["stop_reason"] == "tool_use"
    # the continuation: the first round's blocks (its thinking signed) and the search's result
    assistant, results = second["messages"][-2:]
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "I should look back",
        "signature": "sig-one==",
    }
    assert assistant["content"][-1]["name"] == "search_history"
    (result,) = results["content"]
    assert (
        result["tool_use_id"] == assistant["content"][-1]["id"]
        and "zebra.toml" in result["content"]
    )
    (record,) = [r for r in history.proxy.records() if r["event"] == "history-tool"]
    assert record["tool"] == "search_history" and json.loads(record["arguments"]) == {
        "query": "zebra"
    }
    sent = [r for r in history.proxy.records() if r["event"] == "sent"]
    assert sent[0]["usage"]["input"] == sum(inputs) and sent[0]["usage"]["output"] == 10


def test_anthropic_sdk_reads_the_spliced_stream_and_the_whole_answer(history: Running) -> None:
    with anthropic.Anthropic(base_url=history.anthropic_base, api_key=KEY, max_retries=0) as claude:
        with claude.messages.stream(**ASK) as stream:  # type: ignore[arg-type]
            final = stream.get_final_message()
        whole = claude.messages.create(**ASK)  # type: ignore[arg-type]
    for message in (final, whole):
        assert [b.type for b in message.content] == [
            "thinking",
            "text",
            "thinking",
            "text",
            "tool_use",
        ]
        assert [b.signature for b in message.content if b.type == "thinking"] == [
            "sig-one==",
            "sig-two==",
        ]
        assert message.content[-1].name == "Read" and message.stop_reason == "tool_use"  # type: ignore[union-attr]
        assert message.usage.output_tokens == 10 and message.usage.cache_read_input_tokens == 14
    assert len(history.upstream.bodies()) == 4


def test_without_a_history_call_the_stream_is_the_upstreams_byte_for_byte(history: Running) -> None:
    history.upstream.script = lambda protocol, body: [*FIRST, *calls(("Read", {"path": "a"}))]
    raw = post(history.anthropic_base + "/v1/messages", {**ASK, "stream": True}, ANTHROPIC)
    assert raw == history.upstream.streamed[-1]
    history.upstream.script = lambda protocol, body: text("plain")
    raw = post(
        history.openai_base + "/responses", {"model": "gpt-5", "input": "hi", "stream": True}, {}
    )
    assert raw == history.upstream.streamed[-1]


def test_a_history_call_beside_a_client_call_is_left_out(history: Running) -> None:
    history.upstream.script = lambda protocol, body: [
        *calls(("search_history", {"query": "zebra"})),
        *text("and"),
        *calls(("Read", {"path": "a"})),
    ]
    raw = post(history.anthropic_base + "/v1/messages", {**ASK, "stream": True}, ANTHROPIC)
    events = events_of(raw)
    starts = [e for e in events if e["type"] == "content_block_start"]
    assert [(e["index"], e["content_block"]["type"]) for e in starts] == [
        (0, "text"),
        (1, "tool_use"),
    ]
    assert b"search_history" not in raw and len(history.upstream.bodies()) == 1


RESPONSES = {"model": "gpt-5", "tools": [READ_FN], "input": HISTORY, "store": False,
             "include": ["reasoning.encrypted_content"]}  # fmt: skip


def test_responses_stream_is_one_response_renumbered(history: Running) -> None:
    raw = post(history.openai_base + "/responses", {**RESPONSES, "stream": True}, {})
    events = events_of(raw)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    assert kinds.count("response.created") == 1 and kinds.count("response.completed") == 1
    assert kinds[-1] == "response.completed"
    shown = [e["item"] for e in events if "item" in e] + events[-1]["response"]["output"]
    assert "search_history" not in json.dumps(shown)  # (the response's tools echo the request's)
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert [e["output_index"] for e in added] == list(range(5))
    assert [e["item"]["type"] for e in added] == [
        "reasoning",
        "message",
        "reasoning",
        "message",
        "function_call",
    ]
    done = events[-1]["response"]
    assert done["id"] == events[0]["response"]["id"]
    assert [i["type"] for i in done["output"]] == [e["item"]["type"] for e in added]
    assert [i["encrypted_content"] for i in done["output"] if i["type"] == "reasoning"] == [
        "sig-one==",
        "sig-two==",
    ]
    first, second = history.upstream.bodies("/v1/responses")
    inputs = [max(1, len(json.dumps(b)) // 4) for b in (first, second)]
    assert done["usage"]["input_tokens"] == sum(inputs) and done["usage"]["output_tokens"] == 10
    assert done["usage"]["input_tokens_details"]["cached_tokens"] == 14
    call, output = second["input"][-2:]
    assert call["type"] == "function_call" and call["name"] == "search_history"
    assert second["input"][-4]["type"] == "reasoning"  # the call went back with its reasoning
    assert output == {
        "type": "function_call_output",
        "call_id": call["call_id"],
        "output": output["output"],
    }
    assert "zebra.toml" in output["output"]


def test_openai_sdk_reads_the_spliced_response_streamed_and_whole(history: Running) -> None:
    with openai.OpenAI(base_url=history.openai_base, api_key=KEY, max_retries=0) as gpt:
        with gpt.responses.stream(**RESPONSES) as stream:  # type: ignore[arg-type]
            said = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
            final = stream.get_final_response()
        whole = gpt.responses.create(**RESPONSES)  # type: ignore[arg-type]
    assert said == "Let me check.It is conf/zebra.toml."
    for response in (final, whole):
        assert [i.type for i in response.output] == [
            "reasoning",
            "message",
            "reasoning",
            "message",
            "function_call",
        ]
        assert response.output[-1].name == "Read"  # type: ignore[union-attr]
        assert response.usage is not None and response.usage.output_tokens == 10


CHAT = {"model": "gpt-4o", "messages": HISTORY, "stream_options": {"include_usage": True},
        "tools": [{"type": "function", "function": {"name": "Read", "parameters": READ["input_schema"]}}]}  # fmt: skip


def test_chat_stream_is_one_completion_without_the_proxys_call(history: Running) -> None:
    raw = post(history.openai_base + "/chat/completions", {**CHAT, "stream": True}, {})
    chunks = [json.loads(line[5:]) for line in raw.split(b"\n") if line.startswith(b"data: {")]
    assert raw.endswith(b"data: [DONE]\n\n") and raw.count(b"[DONE]") == 1
    assert b"search_history" not in raw and len({c["id"] for c in chunks}) == 1
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    said = "".join(d.get("content") or "" for d in deltas)
    assert said == "Let me check.It is conf/zebra.toml."
    called = [t for d in deltas for t in d.get("tool_calls") or ()]
    assert {t["index"] for t in called} == {0} and called[0]["function"]["name"] == "Read"
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert [f for f in finish if f] == ["tool_calls"]
    first, second = history.upstream.bodies("/v1/chat/completions")
    assert chunks[-1]["usage"]["completion_tokens"] == 10
    assert chunks[-1]["usage"]["prompt_tokens"] == sum(
        max(1, len(json.dumps(b)) // 4) for b in (first, second)
    )
    assert (
        second["messages"][-1]["role"] == "tool"
        and "zebra.toml" in second["messages"][-1]["content"]
    )
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "search_history"


def test_openai_sdk_reads_the_spliced_chat_completion_streamed_and_whole(history: Running) -> None:
    with openai.OpenAI(base_url=history.openai_base, api_key=KEY, max_retries=0) as gpt:
        whole = gpt.chat.completions.create(**CHAT)  # type: ignore[call-overload]
        streamed = list(gpt.chat.completions.create(**CHAT, stream=True))  # type: ignore[call-overload]
    message = whole.choices[0].message
    assert message.content == "Let me check.It is conf/zebra.toml."
    assert [c.function.name for c in message.tool_calls] == [
        "Read"
    ] and whole.usage.completion_tokens == 10
    said = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
    assert said == message.content and streamed[-1].usage.completion_tokens == 10


def test_no_history_tools_offers_none(upstream: ScriptedUpstream, tmp_path: Path) -> None:
    run, handle = start_proxy(upstream, tmp_path / "p.db", budget=8_000, history_tools=False)
    try:
        post(run.anthropic_base + "/v1/messages", ASK, ANTHROPIC)
        post(run.openai_base + "/responses", RESPONSES, {})
        assert [t["name"] for t in upstream.bodies()[0]["tools"]] == ["Read"]
        assert [t["name"] for t in upstream.bodies("/v1/responses")[0]["tools"]] == ["Read"]
    finally:
        stop_server(*handle)  # type: ignore[misc]
        run.proxy.close()


_BLOCK = st.sampled_from(["text", "thinking", "search"])
_LAST = st.lists(st.sampled_from(["text", "thinking", "read"]), min_size=1, max_size=4)


def _blocks(kinds: list[str], round_: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n, kind in enumerate(kinds):
        if kind == "text":
            out += text(f"said {round_}.{n}")
        elif kind == "thinking":
            out.append(
                {"type": "thinking", "thinking": f"t{round_}.{n}", "signature": f"s{round_}.{n}"}
            )
        elif kind == "search":
            out += calls(("search_history", {"query": f"zebra {round_}"}))
        else:
            out += calls(("Read", {"path": f"f{round_}.{n}"}))
    return out


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    looking=st.lists(st.lists(_BLOCK, max_size=3).map(lambda k: [*k, "search"]), max_size=3),
    last=_LAST,
    protocol=st.sampled_from(["anthropic", "responses"]),
)
def test_any_rounds_read_as_one_answer(
    history: Running, looking: list[list[str]], last: list[str], protocol: str
) -> None:
    rounds = [_blocks(kinds, n) for n, kinds in enumerate([*looking, last])]

    def script(wire: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        asked = [int(n) for n in re.findall(r"zebra (\d+)", json.dumps(body))]
        return rounds[max(asked) + 1 if asked else 0]  # the round after the last one asked

    history.upstream.script = script
    shown = [b for r in rounds for b in r if b.get("name") != "search_history"]
    if protocol == "anthropic":
        raw = post(history.anthropic_base + "/v1/messages", {**ASK, "stream": True}, ANTHROPIC)
        events = events_of(raw)
        kinds = [e["type"] for e in events]
        assert [kinds.count(k) for k in ("message_start", "message_delta", "message_stop")] == [
            1,
            1,
            1,
        ]
        starts = [e for e in events if e["type"] == "content_block_start"]
        assert [e["index"] for e in starts] == list(range(len(shown)))
        assert [e["content_block"]["type"] for e in starts] == [b["type"] for b in shown]
        signatures = [
            e["delta"]["signature"]
            for e in events
            if e.get("delta", {}).get("type") == "signature_delta"
        ]
        assert signatures == [b["signature"] for b in shown if b["type"] == "thinking"]
        assert events[-2]["usage"]["output_tokens"] == 5 * len(rounds)
    else:
        raw = post(history.openai_base + "/responses", {**RESPONSES, "stream": True}, {})
        events = events_of(raw)
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
        added = [e for e in events if e["type"] == "response.output_item.added"]
        assert [e["output_index"] for e in added] == list(range(len(shown)))
        kinds = {"text": "message", "thinking": "reasoning", "tool_use": "function_call"}
        assert [e["item"]["type"] for e in added] == [kinds[b["type"]] for b in shown]
        assert len(events[-1]["response"]["output"]) == len(shown)
        assert events[-1]["response"]["usage"]["output_tokens"] == 5 * len(rounds)
        assert [i["type"] for i in events[-1]["response"]["output"]] == [
            e["item"]["type"] for e in added
        ]
    if protocol == "anthropic":  # (a Responses object's tools echo the request's)
        assert b"search_history" not in raw
