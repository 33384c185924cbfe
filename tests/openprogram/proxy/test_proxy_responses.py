"""OpenAI Responses through the proxy with the official ``openai`` SDK (sync, streaming) and
litellm, against a scripted upstream: stateless ``input`` arrays are rendered, reasoning
travels with its function call, and a request that leans on the provider's stored state
goes as it came, with the reason recorded."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from _scripted_upstream import calls, text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context import TokenCounter
from openprogram import HISTORY_TOOLS
from openprogram.proxy import Proxy, ProxyConfig

KEY = "sk-proj-proxy-test-key-abcdefghijklmnop0123"
TOOLS = [{"type": "function", "name": "read_file", "description": "Read a file",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]  # fmt: skip
THOUGHT = {"type": "thinking", "thinking": "which file?", "signature": "enc-abc=="}


@pytest.fixture
def gpt(running: Any) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=running.openai_base, api_key=KEY, max_retries=0) as c:
        yield c


def pair_problems(items: list[dict[str, Any]]) -> list[str]:
    """Each function call sent with the reasoning of its run before it, each reasoning item
    with a call or message after it in its run, each output after its call (from the wire)."""
    problems, called, run = [], set(), []
    model = ("reasoning", "function_call", "message")
    for n, item in enumerate([*items, {"role": "user", "content": "(end)"}]):
        kind = item.get("type", "message")
        if kind in model and (kind != "message" or item.get("role") == "assistant"):
            run.append(item)
            continue
        if run:
            kinds = [i.get("type", "message") for i in run]
            if kinds[-1] == "reasoning":
                problems.append(f"item {n}: reasoning sent without what it led to")
            for i in run:
                if i.get("type") == "function_call":
                    called.add(i["call_id"])
                    if i.get("id") and "reasoning" not in kinds:
                        problems.append(f"call {i['call_id']} sent without its reasoning")
            run = []
        if kind == "function_call_output" and item["call_id"] not in called:
            problems.append(f"output {item['call_id']} has no call before it")
    return problems


def test_a_call_and_its_reasoning_come_back_and_go_up_again(
    running: Any, gpt: openai.OpenAI
) -> None:
    running.upstream.script = lambda protocol, body: [
        THOUGHT,
        *calls(("read_file", {"path": "a.py"})),
    ]
    given_input: list[Any] = [{"role": "user", "content": "read a.py"}]
    reply = gpt.responses.create(model="gpt-5", instructions="Be brief.", input=given_input,
                                 tools=TOOLS, include=["reasoning.encrypted_content"])  # type: ignore[arg-type]  # fmt: skip
    kinds = [item.type for item in reply.output]
    assert kinds == ["reasoning", "function_call"]
    assert reply.output[0].encrypted_content == "enc-abc=="  # type: ignore[union-attr]
    assert reply.usage is not None and reply.usage.input_tokens_details.cached_tokens == 7
    call = reply.output[1]
    given_input += [item.model_dump(exclude_none=True) for item in reply.output]
    given_input.append({"type": "function_call_output", "call_id": call.call_id, "output": "x = 1"})  # type: ignore[union-attr]
    running.upstream.script = lambda protocol, body: text("a.py sets x")
    final = gpt.responses.create(model="gpt-5", instructions="Be brief.", input=given_input,
                                 tools=TOOLS)  # type: ignore[arg-type]  # fmt: skip
    assert final.output_text == "a.py sets x"
    first, sent = running.upstream.bodies("/v1/responses")
    assert first["input"] == [{"role": "user", "content": "read a.py"}]
    assert sent["input"] == json.loads(json.dumps(given_input))  # within budget: as it came
    assert sent["instructions"] == "Be brief." and sent["tools"][: len(TOOLS)] == TOOLS
    assert {t["name"] for t in sent["tools"][len(TOOLS) :]} == set(HISTORY_TOOLS)  # ours
    records = running.proxy.records()
    assert [r["event"] for r in records] == ["sent", "sent"]
    assert records[0]["protocol"] == "responses" and records[0]["session"] == records[1]["session"]
    assert records[1]["usage"]["cache_read"] == 7 and records[1]["usage"]["output"] == 5


def test_streaming_events_pass_in_order(running: Any, gpt: openai.OpenAI) -> None:
    running.upstream.script = lambda protocol, body: [THOUGHT, *text("hello there"),
                                                      *calls(("read_file", {"path": "x"}))]  # fmt: skip
    events = list(gpt.responses.create(model="gpt-5", input="hi", tools=TOOLS, stream=True))  # type: ignore[arg-type]
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    said = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert said == "hello there"
    with gpt.responses.stream(model="gpt-5", input="again", tools=TOOLS) as stream:  # type: ignore[arg-type]
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == "hello there" == final.output_text
    assert [i.type for i in final.output] == ["reasoning", "message", "function_call"]
    usage = [r["usage"] for r in running.proxy.records()]
    assert all(u is not None and u["cache_read"] == 7 for u in usage) and len(usage) == 2


def test_litellm_responses_through_the_proxy(running: Any) -> None:
    import litellm

    running.upstream.script = lambda protocol, body: text(f"hello from {protocol}")
    said = litellm.responses(model="openai/gpt-5", api_base=running.openai_base, api_key=KEY,
                             input="hi")  # fmt: skip
    assert said.output[0].content[0].text == "hello from responses"  # type: ignore[union-attr]
    assert running.upstream.bodies("/v1/responses")[0]["input"] == [
        {"role": "user", "content": "hi"}
    ]
    assert {r["event"] for r in running.proxy.records()} == {"sent"}


def test_previous_response_id_passes_through_with_the_reason(
    running: Any, gpt: openai.OpenAI
) -> None:
    gpt.responses.create(model="gpt-5", input="one", previous_response_id="resp_abc")
    (sent,) = running.upstream.bodies("/v1/responses")
    assert sent == {"model": "gpt-5", "input": "one", "previous_response_id": "resp_abc"}
    (record,) = running.proxy.records()
    assert record["event"] == "passed" and record["session"] is None
    assert "previous_response_id" in record["reason"] and record["usage"]["output"] == 5
    named = {"x-openprogram-session": "codex-1"}
    gpt.responses.create(
        model="gpt-5", input="two", previous_response_id="resp_b", extra_headers=named
    )
    record = running.proxy.records()[-1]
    assert record["event"] == "passed" and record["session"] == "codex-1"
    assert not running.proxy.store.has_session("codex-1")  # nothing of it was stored
    referring = [{"role": "user", "content": "three"}, {"type": "item_reference", "id": "msg_1"}]
    gpt.responses.create(model="gpt-5", input=referring)  # type: ignore[arg-type]
    record = running.proxy.records()[-1]
    assert record["event"] == "passed" and "item_reference" in record["reason"]
    assert running.upstream.bodies("/v1/responses")[-1]["input"] == referring


def _history(rounds: int, size: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"role": "user", "content": "Fix calc.py"}]
    for n in range(rounds):
        items += [
            {"id": f"rs_{n}", "type": "reasoning", "summary": [], "encrypted_content": f"enc{n}"},
            {"id": f"fc_{n}", "type": "function_call", "call_id": f"call_{n}", "name": "read_file",
             "arguments": json.dumps({"path": f"m{n}.py"})},
            {"type": "function_call_output", "call_id": f"call_{n}",
             "output": f"def f{n}():\n" + "    pass  # body\n" * size},
        ]  # fmt: skip
    return [*items, {"role": "user", "content": "Now run the tests, please."}]


def test_a_long_history_goes_up_compacted_with_reasoning_beside_its_call(
    running: Any, gpt: openai.OpenAI
) -> None:
    items = _history(30, 60)
    counter = TokenCounter("gpt-4o")
    assert counter.count_message({"role": "user", "content": json.dumps(items)}) > 8_000
    gpt.responses.create(model="gpt-5", input=items, tools=TOOLS)  # type: ignore[arg-type]
    sent = running.upstream.bodies("/v1/responses")[-1]["input"]
    assert len(json.dumps(sent)) < len(json.dumps(items)) // 2
    assert pair_problems(sent) == []
    assert sent[0] == items[0] and sent[-1] == items[-1]
    sent_ids = {i.get("id") for i in sent}
    for n in range(30):  # both or neither
        assert (f"rs_{n}" in sent_ids) == (f"fc_{n}" in sent_ids)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rounds=st.integers(1, 25),
    size=st.integers(1, 120),
    budget=st.sampled_from([1_500, 3_000, 8_000]),
)
def test_compaction_never_parts_a_call_from_its_reasoning(
    tmp_path: Path, rounds: int, size: int, budget: int
) -> None:
    proxy = Proxy(
        ProxyConfig(db=":memory:", state_dir=str(tmp_path / uuid.uuid4().hex), budget=budget)
    )
    try:
        body = {"model": "gpt-5", "input": _history(rounds, size), "tools": TOOLS}
        prepared = proxy.prepare("responses", {}, json.dumps(body).encode())
        assert prepared.event == "sent", prepared.reason
        sent = json.loads(prepared.body)["input"]
        assert pair_problems(sent) == []
        assert sent[-1] == body["input"][-1]
    finally:
        proxy.close()


def test_one_conversation_on_three_wires_goes_up_in_each_ones_shape(running: Any) -> None:
    """Regression: a conversation's last conversion was reused across wires (the same
    messages look alike on all three), and a Responses request went out with Anthropic's
    blocks in it."""
    import anthropic

    said = [{"role": "user", "content": "hello there"}]
    with anthropic.Anthropic(base_url=running.anthropic_base, api_key=KEY, max_retries=0) as c:
        c.messages.create(model="claude-sonnet-4-5", max_tokens=8, messages=said)  # type: ignore[arg-type]
    with openai.OpenAI(base_url=running.openai_base, api_key=KEY, max_retries=0) as gpt:
        gpt.responses.create(model="gpt-5", input=said)  # type: ignore[arg-type]
        gpt.chat.completions.create(model="gpt-4o", messages=said)  # type: ignore[arg-type]
    assert {r["event"] for r in running.proxy.records()} == {"sent"}
    assert running.upstream.bodies("/v1/responses")[0]["input"] == said
    assert running.upstream.bodies("/v1/chat/completions")[0]["messages"] == said
