"""Regression tests for bugs found while writing the context engine II suite, one each."""

from __future__ import annotations

from pathlib import Path

from _context_helpers import policy
from _layer_helpers import clock, session

from context import ContextEngine, HeuristicSummarizer, SummaryRequest, SummaryResult
from graph import ConversationGraph


class _Spy(HeuristicSummarizer):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls += 1
        return super().summarize(request)


def test_a_rolled_back_collapse_made_again_reuses_the_stored_summary(tmp_path: Path) -> None:
    # The reuse lookup compared a "summary_key" that no layer ever stored with "", so a
    # stored summary was never found and the summarizer was asked again.
    g = ConversationGraph.memory("s1")
    ids = session(g, 10)
    spy = _Spy()
    e = ContextEngine(g, policy(tmp_path), spy, 1_000_000, clock=clock)
    first = e.collapse(ids[1][0], ids[6][1])
    e.rollback(first.id)
    again = e.collapse(ids[1][0], ids[6][1])
    assert spy.calls == 1
    assert again.layer.meta["summary"] == first.layer.meta["summary"]


def test_a_summary_without_a_summarizer_name_is_named_and_reused(tmp_path: Path) -> None:
    # A third-party summarizer may leave SummaryResult.summarizer empty: records showed
    # an empty name, and reuse (which matches the name) never found its summaries.
    from _layer_helpers import Counting

    g = ConversationGraph.memory("s1")
    ids = session(g, 10)
    counting = Counting()
    e = ContextEngine(g, policy(tmp_path), counting, 1_000_000, clock=clock)
    first = e.collapse(ids[1][0], ids[6][1])
    assert e.records()[-1].details["summarizer"]["name"] == "counting"
    assert first.layer.meta["summary"]["summarizer"] == "counting"
    e.rollback(first.id)
    e.collapse(ids[1][0], ids[6][1])
    assert len(counting.calls) == 1


def test_a_layer_kept_in_memory_has_the_id_its_banner_names(tmp_path: Path) -> None:
    # On a read-only graph (and in a preview) a layer lives in memory; it was given a
    # fresh id, so the expand_layer("...") its summary names raised UnknownLayer.
    import json
    import re

    g = ConversationGraph.memory("s1")
    session(g, 24)
    e = ContextEngine(g.at(g.last_seq), policy(tmp_path), budget=4_000, clock=clock)
    rendered = e.render()
    text = "\n".join(str(m["content"]) for m in rendered.messages)
    named = re.findall(r'expand_layer\("([^"]+)"\)', text)
    assert named and named == [i.id for i in e.layers()]
    assert [r.details["layer"] for r in rendered.records if r.tier == "collapse"] == named
    for layer_id in named:
        assert e.expand(layer_id)
    live = ContextEngine(g, policy(tmp_path / "live"), budget=4_000, clock=clock)
    preview = live.preview()
    shown = re.findall(
        r'expand_layer\("([^"]+)"\)', json.dumps(preview.messages).replace('\\"', '"')
    )
    assert shown == [r.details["layer"] for r in preview.records if r.tier == "collapse"]
