"""Issue 33, in headless Chromium: a replayed trace's first compaction marker sits on the
bar of the call whose prompt dropped (the record names its render, the receipt its
render), not on call 1, though the trace's clock is a year before the receipts' wall
clock. The trace is OpenAI chat messages with their own timestamps; the server is the
real ``openprogram view``. Skipped without a browser, except under ``CI=true``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import openprogram
from context import ContextStorage
from graph import SQLStore
from tests.openprogram._browser import chromium, viewer

ROOT = Path(__file__).resolve().parents[2]


def _trace(path: Path, rounds: int = 24) -> Path:
    """A task, then rounds of a tool call and its output, a minute apart in 2025."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are terse.", "timestamp": "2025-03-01T09:00:00Z"},
        {"role": "user", "content": "Find why /export is slow.", "timestamp": "2025-03-01T09:00:00Z"},
    ]  # fmt: skip
    for n in range(rounds):
        at = f"2025-03-01T{9 + n // 60:02d}:{n % 60:02d}:30Z"
        call = {"id": f"c{n}", "type": "function",
                "function": {"name": "Read", "arguments": json.dumps({"path": f"part_{n}.py"})}}  # fmt: skip
        messages.append({"role": "assistant", "content": f"reading part_{n}.py",
                         "tool_calls": [call], "timestamp": at})  # fmt: skip
        body = "".join(f"def fn_{n}_{i}(x): return x * {i}\n" for i in range(30))
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": body, "timestamp": at})
    messages.append({"role": "assistant", "content": "done", "timestamp": "2025-03-01T10:00:00Z"})
    path.write_text(json.dumps(messages))
    return path


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("replay-view")
    db = folder / "r.db"
    trace = _trace(folder / "trace.json")
    result = openprogram.replay(trace, budget=3_000, db=db, state_dir=folder / "state")
    session = result.session.id
    records = result.session.engine.records()
    result.session.close()
    return {"db": str(db), "session": session, "turns": len(result.turns), "records": records}


@pytest.fixture(scope="module")
def server(replayed: dict[str, Any]) -> Iterator[str]:
    with viewer(replayed["db"]) as line:
        yield line


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def test_the_first_compaction_marker_sits_on_the_call_whose_prompt_dropped(
    browser: Any, server: str, replayed: dict[str, Any]
) -> None:
    storage = ContextStorage(
        SQLStore(replayed["db"], create=False), replayed["session"], migrate=False
    )
    receipts = storage.receipts()
    records = replayed["records"]
    assert len(receipts) == replayed["turns"] < 50  # one page of the timeline
    dropped = next(
        k for k in range(1, len(receipts)) if receipts[k].tokens < receipts[k - 1].tokens
    )
    made = [r for r in records if r.render == receipts[dropped].render]
    assert made and max(r.tokens_before for r in made) > receipts[dropped].tokens
    assert all(r.clock is not None and r.clock.startswith("2025-03-01") for r in records)
    first_compacting = next(k for k, receipt in enumerate(receipts) if receipt.records)
    assert first_compacting == dropped > 0

    context = browser.new_context(viewport={"width": 1100, "height": 760})
    try:
        page = context.new_page()
        page.goto(server)
        base = server.split("/?token=")[0]
        page.goto(f"{base}/s/{replayed['session']}")
        markers = page.locator("svg.timeline g.compaction")
        bars = page.locator("svg.timeline a.bar")
        assert bars.count() == len(receipts)
        assert markers.count() == sum(1 for r in receipts if r.records)
        marker = markers.first
        x = float(marker.locator("line").get_attribute("x1") or "nan")
        centers = bars.evaluate_all(
            "bs => bs.map(b => { const r = b.getBBox(); return [b.dataset.call, r.x + r.width / 2]; })"
        )
        under = [call for call, center in centers if abs(center - x) < 0.5]
        assert under == [receipts[dropped].id]  # the bar of the call whose prompt dropped
        assert under != [receipts[0].id]
        title = marker.locator("title").text_content() or ""
        assert title.startswith(f"call {dropped + 1}: ")
    finally:
        context.close()
