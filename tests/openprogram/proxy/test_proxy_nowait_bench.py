"""Benchmark: with a summarizer that takes 10 s and 2 s between requests, under
``--summary-wait never``, how much longer the requests at the compaction points take than
the same requests sent straight to the (scripted) upstream, in the same run.

Normal runs pass ``--benchmark-disable``: the scenario then runs once, scaled down (a 0.4 s
summarizer, 0.1 s between requests), as a smoke test. Measured with
``pytest tests/openprogram/proxy/test_proxy_nowait_bench.py --benchmark-enable -s``
(about two minutes): ``extra_info`` and the printed line give, for each request whose
render compacted (``adopted``) or went without its summary, its time through the proxy
less the median pass-through time, in milliseconds.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from _scripted_upstream import ScriptedUpstream, stop_server
from _slow_summarizer import HEADERS, Conversation, GatedSummarizer
from conftest import start_proxy

BUDGET = 4_000
REQUESTS = 45


def _timed(client: httpx.Client, url: str, body: bytes, headers: dict[str, str]) -> float:
    started = time.perf_counter()
    answer = client.post(url, content=body, headers=headers)
    elapsed = (time.perf_counter() - started) * 1000
    assert answer.status_code == 200, answer.text
    return elapsed


@pytest.mark.benchmark(group="summary-wait")
def test_bench_the_request_at_the_compaction_point_waits_no_longer(
    benchmark: Any, tmp_path: Path
) -> None:
    summary_s, interval_s = (0.4, 0.1) if benchmark.disabled else (10.0, 2.0)
    slow = GatedSummarizer(summary_s)
    upstream = ScriptedUpstream().start()
    running, handle = start_proxy(
        upstream, tmp_path / "p.db", budget=BUDGET, summary_wait="never", summarizer=slow
    )
    figures: dict[str, Any] = {}

    def scenario() -> None:
        conversation = Conversation()
        proxied, direct, at_compaction = [], [], []
        headers = {**HEADERS, "x-openprogram-session": "bench-nowait"}
        with httpx.Client(timeout=120) as client:
            for _ in range(REQUESTS):
                body = conversation.request()
                ms = _timed(client, running.anthropic_base + "/v1/messages", body, headers)
                record = running.proxy.records()[-1]
                proxied.append(ms)
                if record["summary"] in ("adopted", "went without"):
                    at_compaction.append((record["summary"], ms))
                direct.append(_timed(client, upstream.url + "/v1/messages", body, HEADERS))
                time.sleep(interval_s)
        base = statistics.median(direct)
        figures.update(
            summarizer_s=summary_s,
            between_requests_s=interval_s,
            pass_through_median_ms=round(base, 2),
            proxy_median_ms=round(statistics.median(proxied), 2),
            at_compaction_added_ms=[(said, round(ms - base, 2)) for said, ms in at_compaction],
            worst_added_ms=round(max((ms for _, ms in at_compaction), default=base) - base, 2),
        )

    try:
        benchmark.pedantic(scenario, rounds=1, iterations=1)
    finally:
        slow.gate.set()
        stop_server(*handle)  # type: ignore[misc]
        upstream.stop()
        records = running.proxy.records()
        running.proxy.close()
    benchmark.extra_info.update(figures)
    print("\nsummary-wait never:", json.dumps(figures))
    assert figures["at_compaction_added_ms"], "no request reached a compaction point"
    assert all(r["event"] == "sent" and r["tokens"] <= BUDGET for r in records)
