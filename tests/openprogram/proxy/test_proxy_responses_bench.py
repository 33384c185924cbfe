"""Benchmark: the latency the proxy adds to an OpenAI Responses request at 1,000 stored
items, beside pass-through (the same request straight to the scripted upstream) in the
same run.

Normal runs pass ``--benchmark-disable`` (it runs once, as a smoke test);
``pytest tests/openprogram/proxy/test_proxy_responses_bench.py --benchmark-enable``
measures it: added latency = the proxy's median - pass-through's median (group
``responses``); every proxied request is checked to be within the budget.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import _latency_bench as latency
import httpx
import pytest
from conftest import Running

TOOLS = [{"type": "function", "name": "read_file", "description": "Read a file",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]  # fmt: skip
HEADERS = {"authorization": "Bearer k", "content-type": "application/json"}


class Conversation(latency.Growing):
    """A growing Codex-like history: per turn a reasoning item, its call and the output."""

    def entries(self, n: int) -> list[dict[str, Any]]:
        return [
            {"id": f"rs_{n:05d}", "type": "reasoning", "summary": [], "encrypted_content": f"enc-{n}"},
            {"id": f"fc_{n:05d}", "type": "function_call", "call_id": f"call_{n:05d}",
             "name": "read_file", "arguments": json.dumps({"path": f"src/mod_{n}.py"})},
            {"type": "function_call_output", "call_id": f"call_{n:05d}", "output": self.source(n)},
        ]  # fmt: skip

    def request(self) -> bytes:
        self.grow()
        body = {"model": "gpt-5", "instructions": "You are a coding agent.", "tools": TOOLS,
                "input": self.history, "store": False}  # fmt: skip
        return json.dumps(body).encode()


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, httpx.Client]]:
    with latency.proxy_and_client(tmp_path_factory, "responses-bench") as both:
        yield both


@pytest.mark.benchmark(group="responses")
@latency.BOTH_WAYS
def test_bench_responses_at_1000_stored_items(
    benchmark: Any, setup: tuple[Running, httpx.Client], via: str
) -> None:
    running, client = setup
    conversation = Conversation(latency.STORED)
    headers = {**HEADERS, "x-openprogram-session": f"bench-{via}"}
    base = running.openai_base if via == "proxy" else running.upstream.url + "/v1"
    url = base + "/responses"
    answer = latency.timed(benchmark, conversation.request, latency.poster(client, url, headers))
    assert answer.status_code == 200 and answer.json()["output"][0]["type"] == "message"
    if via == "proxy":
        sent = latency.sent_records(benchmark, running, "bench-proxy")
        assert len(sent) > 1 and all(r["event"] == "sent" for r in sent)
        over = [r for r in sent if r["tokens"] > latency.BUDGET]
        benchmark.extra_info["over_budget"] = len(over)
        assert over == []
