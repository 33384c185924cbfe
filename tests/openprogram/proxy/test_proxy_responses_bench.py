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
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _scripted_upstream import ScriptedUpstream, stop_server
from conftest import Running, start_proxy

STORED = 1_000
BUDGET = 32_000
TOOLS = [{"type": "function", "name": "read_file", "description": "Read a file",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]  # fmt: skip
HEADERS = {"authorization": "Bearer k", "content-type": "application/json"}


class Conversation:
    """A growing Codex-like history: per turn a reasoning item, its call and the output."""

    def __init__(self, items: int) -> None:
        self.items: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test"}]
        self.turn = 0
        while len(self.items) < items:
            self.grow()

    def grow(self) -> None:
        n = self.turn = self.turn + 1
        output = f"def handler_{n}(event):\n" + f"    value_{n} = event.get('k{n}')\n" * 6
        self.items += [
            {"id": f"rs_{n:05d}", "type": "reasoning", "summary": [], "encrypted_content": f"enc-{n}"},
            {"id": f"fc_{n:05d}", "type": "function_call", "call_id": f"call_{n:05d}",
             "name": "read_file", "arguments": json.dumps({"path": f"src/mod_{n}.py"})},
            {"type": "function_call_output", "call_id": f"call_{n:05d}", "output": output},
        ]  # fmt: skip

    def request(self) -> bytes:
        self.grow()
        body = {"model": "gpt-5", "instructions": "You are a coding agent.", "tools": TOOLS,
                "input": self.items, "store": False}  # fmt: skip
        return json.dumps(body).encode()


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, httpx.Client]]:
    upstream = ScriptedUpstream().start()
    running, handle = start_proxy(
        upstream, Path(tmp_path_factory.mktemp("responses-bench")) / "p.db", budget=BUDGET
    )
    with httpx.Client(timeout=60) as client:
        yield running, client
    stop_server(*handle)  # type: ignore[misc]
    upstream.stop()
    running.proxy.close()


@pytest.mark.benchmark(group="responses")
@pytest.mark.parametrize("via", ["pass-through", "proxy"])
def test_bench_responses_at_1000_stored_items(
    benchmark: Any, setup: tuple[Running, httpx.Client], via: str
) -> None:
    running, client = setup
    conversation = Conversation(STORED)
    headers = {**HEADERS, "x-openprogram-session": f"bench-{via}"}
    base = running.openai_base if via == "proxy" else running.upstream.url + "/v1"
    url = base + "/responses"
    client.post(url, content=conversation.request(), headers=headers)  # stores the 1,000

    def send(body: bytes) -> httpx.Response:
        return client.post(url, content=body, headers=headers)

    answer = benchmark.pedantic(
        send, setup=lambda: ((conversation.request(),), {}), rounds=30, iterations=1
    )
    assert answer.status_code == 200 and answer.json()["output"][0]["type"] == "message"
    if via == "proxy":
        sent = [r for r in running.proxy.records() if r["session"] == "bench-proxy"]
        assert len(sent) > 1 and all(r["event"] == "sent" for r in sent)
        over = [r for r in sent if r["tokens"] > BUDGET]
        benchmark.extra_info["over_budget"] = len(over)
        assert over == []
        benchmark.extra_info["prepare_ms_median"] = statistics.median(
            r["prepare_ms"] for r in sent[1:]
        )
