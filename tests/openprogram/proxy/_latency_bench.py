"""What the proxy's latency benchmarks share: a proxy in front of its own scripted upstream
for the whole module, a coding agent's history grown a turn at a time, and the request timed
after the first one stored that history."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from _scripted_upstream import ScriptedUpstream, stop_server
from conftest import Running, start_proxy

STORED = 1_000
BUDGET = 32_000
ROUNDS = 30
BOTH_WAYS = pytest.mark.parametrize("via", ["pass-through", "proxy"])
"""Each benchmark runs through the proxy and straight to the upstream, to compare."""


class Growing:
    """A history that starts with the task and grows by ``turn(n)``'s entries to ``size``."""

    def __init__(self, size: int) -> None:
        self.history: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test"}]
        self.turn = 0
        while len(self.history) < size:
            self.grow()

    def grow(self) -> None:
        self.turn += 1
        self.history += self.entries(self.turn)

    def entries(self, n: int) -> list[dict[str, Any]]:
        raise NotImplementedError

    @staticmethod
    def source(n: int) -> str:
        """The text a read of the ``n``-th module returns."""
        return f"def handler_{n}(event):\n" + f"    value_{n} = event.get('k{n}')\n" * 6


@contextmanager
def proxy_and_client(
    tmp_path_factory: pytest.TempPathFactory, name: str
) -> Iterator[tuple[Running, httpx.Client]]:
    upstream = ScriptedUpstream().start()
    running, handle = start_proxy(
        upstream, Path(tmp_path_factory.mktemp(name)) / "p.db", budget=BUDGET
    )
    with httpx.Client(timeout=60) as client:
        yield running, client
    stop_server(*handle)  # type: ignore[misc]
    upstream.stop()
    running.proxy.close()


def poster(client: httpx.Client, url: str, headers: dict[str, str]) -> Callable[[bytes], Any]:
    """A request body's POST to ``url``, answered as a whole."""

    def send(body: bytes) -> httpx.Response:
        return client.post(url, content=body, headers=headers)

    return send


def timed(benchmark: Any, request: Callable[[], bytes], send: Callable[[bytes], Any]) -> Any:
    """``send``'s answer, timed over ``ROUNDS`` fresh requests once the first has stored
    the history."""
    send(request())
    return benchmark.pedantic(send, setup=lambda: ((request(),), {}), rounds=ROUNDS, iterations=1)


def sent_records(benchmark: Any, running: Running, session: str) -> list[dict[str, Any]]:
    """The proxy's records of ``session``; the engine's part of each request after the
    first (recognise, mirror, render, build) goes to ``extra_info``."""
    sent = [r for r in running.proxy.records() if r["session"] == session]
    if len(sent) > 1:
        benchmark.extra_info["prepare_ms_median"] = statistics.median(
            r["prepare_ms"] for r in sent[1:]
        )
    return sent
