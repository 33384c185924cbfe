"""No request waits for a summary (``--summary-wait never``), and what the wire carries for
the cache and the cost: a breakpoint after the summary layers, the provider's usage on
every receipt, cached and uncached input on the viewer's timeline.

The summarizer is a fake that writes nothing until the test lets it (``_slow_summarizer``):
a request that comes back while it is held did not wait for it, with no clock involved.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _scripted_upstream import CACHED, ScriptedUpstream, stop_server
from _slow_summarizer import HEADERS, Conversation, GatedSummarizer
from conftest import Running, start_proxy

# internal: the viewer's data layer, where `openprogram view` reads the receipts
from context import ContextStorage, RenderReceipt
from graph import SQLStore
from tests.openprogram._browser import served

BUDGET = 4_000


@pytest.fixture
def gated(upstream: ScriptedUpstream, tmp_path: Path) -> Iterator[tuple[Running, GatedSummarizer]]:
    slow = GatedSummarizer()
    run, handle = start_proxy(
        upstream, tmp_path / "p.db", budget=BUDGET, summary_wait="never", summarizer=slow
    )
    yield run, slow
    slow.gate.set()
    stop_server(*handle)  # type: ignore[misc]
    run.proxy.close()


def _receipts(db: Path) -> list[RenderReceipt]:
    """The proxy session's receipts, as the viewer reads them (with the provider's usage)."""
    stored = SQLStore(db, create=False, read_only=True)
    try:
        return ContextStorage(stored, "nowait").receipts()
    finally:
        stored.close()


def _marks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The blocks of ``body`` that carry a ``cache_control`` breakpoint."""
    system = body.get("system")
    blocks = [*(system if isinstance(system, list) else []), *body.get("tools", [])]
    for message in body["messages"]:
        if isinstance(message["content"], list):
            blocks += message["content"]
    return [block for block in blocks if "cache_control" in block]


def _send(
    run: Running, client: httpx.Client, conversation: Conversation, *, marks: int = 0
) -> dict[str, Any]:
    url = run.anthropic_base + "/v1/messages"
    headers = {**HEADERS, "x-openprogram-session": "nowait"}
    body = json.loads(conversation.request())
    if marks:  # the client's own breakpoints: system, tools, then its newest messages
        ephemeral = {"type": "ephemeral"}
        body["system"] = [{"type": "text", "text": body["system"], "cache_control": ephemeral}]
        body["tools"] = [{**body["tools"][0], "cache_control": ephemeral}]
        for message in body["messages"][-(marks - 2) :]:
            message["content"] = [{**b, "cache_control": ephemeral} for b in message["content"]]
    answer = client.post(url, content=json.dumps(body), headers=headers)
    assert answer.status_code == 200, answer.text
    return run.proxy.records()[-1]


def test_the_request_at_the_compaction_point_does_not_wait_and_the_next_adopts_it(
    gated: tuple[Running, GatedSummarizer],
) -> None:
    run, slow = gated
    conversation = Conversation()
    with httpx.Client(timeout=60) as client:
        record = _send(run, client, conversation)
        while record["summary"] != "went without" and conversation.turn < 80:
            record = _send(run, client, conversation)
        assert record["summary"] == "went without"
        # answered while the summary it needed is still held: it did not wait for it
        assert slow.started > slow.finished and not slow.gate.is_set()
        slow.gate.set()
        while record["summary"] != "adopted" and conversation.turn < 120:
            assert slow.settle()
            record = _send(run, client, conversation)
    assert record["summary"] == "adopted"
    sent = run.upstream.bodies()[-1]
    (marked,) = _marks(sent)  # the client set none: one after the summary layers
    assert "[Context Compaction]" in marked["text"]
    records = run.proxy.records()
    assert all(r["event"] == "sent" and r["tokens"] <= BUDGET for r in records)
    receipts = _receipts(run.db)
    said = [r.summary for r in receipts]
    assert said.index("went without") < said.index("adopted")
    assert [r.summary or None for r in receipts] == [r["summary"] for r in records]


def test_the_breakpoint_after_the_summaries_never_takes_a_place_of_the_clients(
    gated: tuple[Running, GatedSummarizer],
) -> None:
    run, slow = gated
    slow.gate.set()
    conversation = Conversation()
    with httpx.Client(timeout=60) as client:
        while "[Context Compaction]" not in json.dumps(run.upstream.bodies()[-1:]):
            assert conversation.turn < 120 and slow.settle()
            _send(run, client, conversation, marks=3)
        three = run.upstream.bodies()[-1]
        _send(run, client, conversation, marks=4)
        four = run.upstream.bodies()[-1]
    assert len(_marks(three)) == 4  # the client's three and ours
    assert any("[Context Compaction]" in str(b.get("text")) for b in _marks(three))
    assert len(_marks(four)) == 4  # the client's four: no room for ours
    assert not any("[Context Compaction]" in str(b.get("text")) for b in _marks(four))


def test_every_receipt_carries_the_providers_usage_and_the_timeline_shows_its_input(
    gated: tuple[Running, GatedSummarizer],
) -> None:
    run, slow = gated
    slow.gate.set()
    conversation = Conversation()
    with httpx.Client(timeout=60) as client:
        for _ in range(3):
            _send(run, client, conversation)
    receipts = _receipts(run.db)
    sent = run.upstream.bodies()
    assert len(receipts) == 3
    for receipt, body in zip(receipts, sent, strict=True):
        assert receipt.usage is not None  # as the scripted provider reported it
        assert receipt.usage.cached_input_tokens == CACHED
        assert receipt.usage.uncached_input_tokens == max(1, len(json.dumps(body)) // 4)
    with served(run.db) as fetch:  # `openprogram view`, as a user starts it
        status, page, _ = fetch("/s/nowait")
    assert status == 200
    assert "cached input" in page and "uncached input" in page
    cached = re.findall(r'<td class="n cached">([^<]*)</td>', page)
    uncached = re.findall(r'<td class="n uncached">([^<]*)</td>', page)
    assert cached == [str(CACHED)] * 3
    assert sorted(uncached) == sorted(
        f"{r.usage.uncached_input_tokens:,}" for r in receipts if r.usage
    )
