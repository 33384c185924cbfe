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
from collections.abc import Iterator
from typing import Any

import _latency_bench as latency
import httpx
import pytest
from conftest import Running

TOOLS = [
    {
        "name": "Read",
        "description": "Read a file",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]


class Conversation(latency.Growing):
    """A growing Claude-Code-like history: a tool call and its result per turn."""

    def entries(self, n: int) -> list[dict[str, Any]]:
        return [
            {"role": "assistant", "content": [
                {"type": "text", "text": f"Reading module {n}."},
                {"type": "tool_use", "id": f"toolu_{n:05d}", "name": "Read", "input": {"path": f"src/mod_{n}.py"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{n:05d}", "content": self.source(n)}]},
        ]  # fmt: skip

    def request(self, *, stream: bool = False) -> bytes:
        self.grow()
        body = {"model": "claude-sonnet-4-5", "max_tokens": 256, "system": "You are a coding agent.",
                "tools": TOOLS, "messages": self.history, "stream": stream}  # fmt: skip
        return json.dumps(body).encode()


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, httpx.Client]]:
    with latency.proxy_and_client(tmp_path_factory, "proxy-bench") as both:
        yield both


HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01", "content-type": "application/json"}


def _url(running: Running, via: str) -> str:
    base = running.anthropic_base if via == "proxy" else running.upstream.url
    return base + "/v1/messages"


@pytest.mark.benchmark(group="request")
@latency.BOTH_WAYS
def test_bench_request_at_1000_stored_messages(
    benchmark: Any, setup: tuple[Running, httpx.Client], via: str
) -> None:
    running, client = setup
    conversation = Conversation(latency.STORED)
    headers = {**HEADERS, "x-openprogram-session": f"bench-{via}"}
    url = _url(running, via)
    answer = latency.timed(benchmark, conversation.request, latency.poster(client, url, headers))
    assert answer.status_code == 200 and answer.json()["content"][0]["text"] == "ok, done"
    if via == "proxy":
        sent = latency.sent_records(benchmark, running, "bench-proxy")
        assert sent and all(r["event"] == "sent" and r["tokens"] <= latency.BUDGET for r in sent)


@pytest.mark.benchmark(group="first-byte")
@latency.BOTH_WAYS
def test_bench_first_streamed_byte(
    benchmark: Any, setup: tuple[Running, httpx.Client], via: str
) -> None:
    running, client = setup
    conversation = Conversation(latency.STORED)
    headers = {**HEADERS, "x-openprogram-session": f"bench-stream-{via}"}
    url = _url(running, via)

    def first_byte(body: bytes) -> bytes:
        with client.stream("POST", url, content=body, headers=headers) as answer:
            chunks = answer.iter_raw()
            first = next(chunks)
            for _ in chunks:  # read to the end so the record is written
                pass
            return first

    first = latency.timed(benchmark, lambda: conversation.request(stream=True), first_byte)
    assert first.startswith(b"event: message_start")
