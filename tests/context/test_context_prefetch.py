"""Proactive summaries: computed ahead on a worker, used only when the budget needs them."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from _context_helpers import Stable, policy

from context import Anchors, ContextEngine, SummaryRequest, SummaryResult
from graph import ConversationGraph


class SlowSummarizer:
    """Counts calls and the threads they ran on; ``proactive`` asks for prefetching."""

    name = "slow"
    proactive = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.threads: set[str] = set()
        self.lock = threading.Lock()

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        with self.lock:
            self.calls.append(tuple(request.node_ids))
            self.threads.add(threading.current_thread().name)
        first = request.node_ids[0]
        return SummaryResult(
            anchors=Anchors(execution_progress=(f"from {first}",)), summarizer="slow"
        )


def _grow(g: ConversationGraph, start: int, rounds: int) -> None:
    for i in range(start, start + rounds):
        g.append({"role": "user", "content": f"step {i}: " + "detail " * 150})
        g.append({"role": "assistant", "content": f"done {i}: " + "result " * 150})


def _session() -> ConversationGraph:
    g = ConversationGraph.memory("pre")
    g.append({"role": "system", "content": "sys"})
    g.append({"role": "user", "content": "the task"})
    return g


def test_summaries_start_ahead_and_are_used_once_needed(tmp_path: Path) -> None:
    g = _session()
    slow = SlowSummarizer()
    engine = ContextEngine(g, policy(tmp_path, proactive_share=0.5), slow, budget=8_000)
    _grow(g, 0, 20)
    first = engine.render()
    assert first.fits and not g.layers()  # under budget: nothing applied...
    assert engine.prefetch is not None and engine.prefetch.scheduled >= 1  # ...but started
    ahead = list(slow.calls)
    _grow(g, 20, 12)
    second = engine.render()
    assert second.fits and g.layers()  # now the budget needs them
    used = [layer.covers for layer in g.layers()]
    assert all(covers in slow.calls for covers in used)
    assert len(slow.calls) == len(set(slow.calls))  # never summarized twice
    assert any(name.startswith("openprogram-summary") for name in slow.threads)
    assert ahead and ahead[0] == used[0]
    engine.close()


def test_a_render_does_not_depend_on_whether_a_summary_was_ready(tmp_path: Path) -> None:
    renders = []
    for share in (0.5, None):
        g = _session()
        engine = ContextEngine(
            g, policy(tmp_path / str(share), proactive_share=share), SlowSummarizer(), budget=8_000
        )
        _grow(g, 0, 20)
        engine.render()
        _grow(g, 20, 12)
        rendered = engine.render()
        assert g.layers()
        renders.append(json.dumps(Stable()(rendered.messages)))
        engine.close()
    assert renders[0] == renders[1]


def test_the_heuristic_summarizer_is_not_prefetched(tmp_path: Path) -> None:
    engine = ContextEngine(_session(), policy(tmp_path), budget=8_000)
    assert engine.prefetch is None
