"""Benchmarks: the latency the proxy adds per request at 1,000 stored messages, and the
time to the first streamed byte, each beside pass-through (the same request straight to the
scripted upstream) in the same run.

Normal runs pass ``--benchmark-disable`` (each runs once, as a smoke test);
``pytest tests/openprogram/proxy/test_proxy_bench.py --benchmark-enable`` measures them:
added latency = the proxy's median - pass-through's median (group ``request``), and the
same for the first byte of a streamed answer (group ``first-byte``).
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
TOOLS = [
    {
        "name": "Read",
        "description": "Read a file",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]


class Conversation:
    """A growing Claude-Code-like history: a tool call and its result per turn."""

    def __init__(self, messages: int) -> None:
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test"}]
        self.turn = 0
        while len(self.messages) < messages:
            self.grow()

    def grow(self) -> None:
        n = self.turn = self.turn + 1
        self.messages.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Reading module {n}."},
            {"type": "tool_use", "id": f"toolu_{n:05d}", "name": "Read", "input": {"path": f"src/mod_{n}.py"}}]})  # fmt: skip
        result = f"def handler_{n}(event):\n" + f"    value_{n} = event.get('k{n}')\n" * 6
        self.messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{n:05d}", "content": result}
                ],
            }
        )

    def request(self, *, stream: bool = False) -> bytes:
        self.grow()
        body = {"model": "claude-sonnet-4-5", "max_tokens": 256, "system": "You are a coding agent.",
                "tools": TOOLS, "messages": self.messages, "stream": stream}  # fmt: skip
        return json.dumps(body).encode()


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, httpx.Client]]:
    upstream = ScriptedUpstream().start()
    running, handle = start_proxy(
        upstream, Path(tmp_path_factory.mktemp("proxy-bench")) / "p.db", budget=BUDGET
    )
    with httpx.Client(timeout=60) as client:
        yield running, client
    stop_server(*handle)  # type: ignore[misc]
    upstream.stop()
    running.proxy.close()


HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01", "content-type": "application/json"}


def _base(running: Running, via: str) -> str:
    return running.anthropic_base if via == "proxy" else running.upstream.url


@pytest.mark.benchmark(group="request")
@pytest.mark.parametrize("via", ["pass-through", "proxy"])
def test_bench_request_at_1000_stored_messages(
    benchmark: Any, setup: tuple[Running, httpx.Client], via: str
) -> None:
    running, client = setup
    conversation = Conversation(STORED)
    headers = {**HEADERS, "x-openprogram-session": f"bench-{via}"}
    url = _base(running, via) + "/v1/messages"
    client.post(url, content=conversation.request(), headers=headers)  # stores the 1,000

    def send(body: bytes) -> httpx.Response:
        return client.post(url, content=body, headers=headers)

    answer = benchmark.pedantic(
        send, setup=lambda: ((conversation.request(),), {}), rounds=30, iterations=1
    )
    assert answer.status_code == 200 and answer.json()["content"][0]["text"] == "ok, done"
    if via == "proxy":
        sent = [r for r in running.proxy.records() if r["session"] == "bench-proxy"]
        assert sent and all(r["event"] == "sent" and r["tokens"] <= BUDGET for r in sent)
        # the engine's part of it (recognise, mirror, render, build), as each record says
        benchmark.extra_info["prepare_ms_median"] = statistics.median(
            r["prepare_ms"] for r in sent[1:]
        )


@pytest.mark.benchmark(group="first-byte")
@pytest.mark.parametrize("via", ["pass-through", "proxy"])
def test_bench_first_streamed_byte(
    benchmark: Any, setup: tuple[Running, httpx.Client], via: str
) -> None:
    running, client = setup
    conversation = Conversation(STORED)
    headers = {**HEADERS, "x-openprogram-session": f"bench-stream-{via}"}
    url = _base(running, via) + "/v1/messages"
    client.post(url, content=conversation.request(stream=True), headers=headers)

    def first_byte(body: bytes) -> bytes:
        with client.stream("POST", url, content=body, headers=headers) as answer:
            chunks = answer.iter_raw()
            first = next(chunks)
            for _ in chunks:  # read to the end so the record is written
                pass
            return first

    first = benchmark.pedantic(
        first_byte,
        setup=lambda: ((conversation.request(stream=True),), {}),
        rounds=30,
        iterations=1,
    )
    assert first.startswith(b"event: message_start")
