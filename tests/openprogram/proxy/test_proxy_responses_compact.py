"""``/v1/responses/compact`` through the proxy with the official ``openai`` SDK: the request
passes through, the answer comes back as the provider gave it, and it is kept as a
provider layer of the conversation's session: the next request sends the compaction item
where the layer stands, and once the layer is rolled back locally, the originals again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from _scripted_upstream import text

KEY = "sk-proj-proxy-test-key-abcdefghijklmnop0123"
SESSION = {"x-openprogram-session": "codex-compact"}


@pytest.fixture
def gpt(running: Any) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=running.openai_base, api_key=KEY, max_retries=0, default_headers=SESSION
    ) as c:
        yield c


def _items(rounds: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"role": "user", "content": "Fix calc.py"}]
    for n in range(rounds):
        items += [
            {"id": f"rs_{n}", "type": "reasoning", "summary": [], "encrypted_content": f"enc{n}"},
            {"id": f"fc_{n}", "type": "function_call", "call_id": f"call_{n}",
             "name": "read_file", "arguments": json.dumps({"path": f"m{n}.py"})},
            {"type": "function_call_output", "call_id": f"call_{n}", "output": f"x{n} = {n}"},
        ]  # fmt: skip
    return items


def test_a_compaction_is_kept_as_a_layer_that_rolls_back(running: Any, gpt: openai.OpenAI) -> None:
    history = [*_items(6), {"role": "user", "content": "Go on"}]
    running.upstream.script = lambda protocol, body: text("going on")
    gpt.responses.create(model="gpt-5", input=history)  # type: ignore[arg-type]
    raw = gpt.responses.with_raw_response.compact(model="gpt-5", input=history)  # type: ignore[arg-type]
    compacted = raw.parse()
    assert [i.type for i in compacted.output] == ["message", "message", "compaction"]
    assert running.upstream.bodies("/v1/responses/compact") == [
        {"model": "gpt-5", "input": history}
    ]
    record = running.proxy.records()[-1]
    assert record["event"] == "passed" and record["session"] == "codex-compact"
    assert record["reason"].startswith("responses/compact: kept as provider layer")
    assert record["usage"]["cache_read"] == 7
    session, _ = running.proxy.session("codex-compact", "gpt-5")
    (layer,) = [i for i in session.engine.layers(active=True) if i.kind == "provider"]
    assert record["reason"].endswith(layer.id)

    window = raw.http_response.json()["output"]  # as a client keeps it
    gpt.responses.create(model="gpt-5", input=[*window, {"role": "user", "content": "Next"}])  # type: ignore[arg-type]
    sent = running.upstream.bodies("/v1/responses")[-1]["input"]
    kinds = [i.get("type", "message") for i in sent]
    assert "compaction" in kinds and "function_call" not in kinds  # the layer stands for them
    assert sent[0] == history[0] and sent[-1] == {"role": "user", "content": "Next"}
    assert [r["event"] for r in running.proxy.records()][-1] == "sent"

    session.engine.rollback(layer.id, "test")
    gpt.responses.create(model="gpt-5", input=[*window, {"role": "user", "content": "Again"}])  # type: ignore[arg-type]
    sent = running.upstream.bodies("/v1/responses")[-1]["input"]
    assert "compaction" not in [i.get("type") for i in sent]
    assert sent[: len(history)] == history  # the originals, as the client first sent them
    assert sent[-1] == {"role": "user", "content": "Again"}


def test_a_compaction_of_an_unknown_conversation_only_passes(
    running: Any, gpt: openai.OpenAI
) -> None:
    compacted = gpt.responses.compact(model="gpt-5", input=_items(2))  # type: ignore[arg-type]
    assert compacted.output[-1].type == "compaction"
    (record,) = running.proxy.records()
    assert record["event"] == "passed" and "not seen" in record["reason"]
