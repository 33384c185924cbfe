"""Compactions that pay for themselves: a collapse or compaction is made only if it saves at
least ``payoff_share`` of what it summarizes for the first time, and a part whose summary did
not pay is asked about again only once it has grown by ``payoff_retry_tokens``."""

from __future__ import annotations

from pathlib import Path

from _context_helpers import policy, start, tool_round
from _layer_helpers import NOW, clock

from context import Anchors, ContextEngine, SummaryRequest, SummaryResult
from graph import ConversationGraph

COLLAPSE = ("collapse", "emergency")
COMPACT = ("compact", "emergency")


class Echo:
    """A summarizer whose prose is ``share`` of the covered text: a long-winded summary."""

    name = "echo"

    def __init__(self, share: float) -> None:
        self.share = share
        self.calls = 0

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls += 1
        text = " ".join(str(m.get("content") or "") for m in request.messages)
        return SummaryResult(
            anchors=Anchors(user_intent=("fix it",)), prose=text[: int(len(text) * self.share)]
        )


def rounds(g: ConversationGraph, first: int, count: int) -> None:
    for i in range(first, first + count):
        g.append({"role": "user", "content": f"step {i}"}, at=NOW)
        tool_round(
            g, [("Bash", f"output line {i}\n" * 30)], prefix=f"c{i}", content=f"ran {i}", at=NOW
        )


def session(count: int = 24) -> ConversationGraph:
    g = ConversationGraph.memory("payoff")
    start(g)
    rounds(g, 0, count)
    return g


def engine(
    g: ConversationGraph,
    tmp_path: Path,
    summarizer: Echo,
    cascade: tuple[str, ...],
    share: float = 0.6,
) -> ContextEngine:
    pol = policy(tmp_path, cascade=cascade, always=(), microcompact_first=10_000)
    full = ContextEngine(g, pol, budget=1_000_000, clock=clock).render().tokens
    return ContextEngine(g, pol, summarizer, budget=int(full * share), clock=clock)


def test_a_collapse_that_saves_under_30_percent_is_not_made_nor_asked_again(tmp_path: Path) -> None:
    g = session()
    wordy = Echo(0.8)
    e = engine(g, tmp_path, wordy, COLLAPSE)
    e.render()
    assert wordy.calls > 0
    assert [i for i in g.layers() if i.kind == "collapse"] == []
    asked = wordy.calls
    e.render()
    assert wordy.calls == asked  # the same segments are not asked about again

    terse = Echo(0.1)
    e = engine(session(), tmp_path / "b", terse, COLLAPSE)
    made = e.render()
    layers = [r for r in made.records if r.tier == "collapse" and r.error is None]
    assert layers and all(r.tokens_before - r.tokens_after > 0 for r in layers)


def test_a_compaction_that_does_not_pay_is_retried_only_once_the_part_grew(tmp_path: Path) -> None:
    g = session()
    wordy = Echo(0.8)
    e = engine(g, tmp_path, wordy, COMPACT)
    e.render()
    assert wordy.calls == 1
    assert [i for i in g.layers() if i.kind == "compact"] == []
    rounds(g, 100, 1)  # far less than payoff_retry_tokens (2,000) of new rounds
    e.render()
    assert wordy.calls == 1
    rounds(g, 200, 12)  # more than 2,000 tokens more
    e.render()
    assert wordy.calls == 2


def test_the_new_rounds_of_an_incremental_compaction_must_pay_not_the_merged_summary(
    tmp_path: Path,
) -> None:
    g = session()
    terse = Echo(0.05)
    e = engine(g, tmp_path, terse, COMPACT)
    e.render()
    [first] = [i for i in g.layers() if i.kind == "compact"]
    rounds(g, 300, 30)
    e.render()
    made = [i for i in g.layers(active=True) if i.kind == "compact" and i.id != first.id]
    assert made  # an incremental compaction merging the first one


def test_manual_compact_is_exempt(tmp_path: Path) -> None:
    g = session()
    wordy = Echo(0.8)
    e = engine(g, tmp_path, wordy, COMPACT, share=10.0)
    info = e.compact()
    assert info.kind == "compact"
