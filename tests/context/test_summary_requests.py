"""C9: what a summary request carries is bounded, whatever the covered rounds printed.

Each text over ``summary_item_chars`` is sent as its head and tail, and the bound halves
while the whole is over ``summary_request_tokens``; the summary is still of what happened
(the stored texts, shortened), and identifiers are ranked locally from the whole texts."""

from __future__ import annotations

from pathlib import Path

from _context_helpers import policy, start, tool_round
from _layer_helpers import NOW, clock

from context import (
    ContextEngine,
    HeuristicSummarizer,
    LiteLLMSummarizer,
    Policy,
    SummaryRequest,
    SummaryResult,
    TokenCounter,
    Unit,
)
from graph import ConversationGraph

MIDDLE = "middle_only_identifier.rs"


class Capturing:
    """The heuristic summarizer, keeping every request it was asked."""

    name = "capturing"

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.requests.append(request)
        return HeuristicSummarizer().summarize(request)


def huge_output(i: int) -> str:
    filler = "".join(f"line {n} of output {i}\n" for n in range(3_000))
    middle = len(filler) // 2
    return f"{filler[:middle]}\n{MIDDLE} {MIDDLE} {MIDDLE}\n{filler[middle:]}"


def session(rounds: int = 16) -> ConversationGraph:
    g = ConversationGraph.memory("bounded")
    start(g)
    for i in range(rounds):
        g.append({"role": "user", "content": f"step {i}"}, at=NOW)
        tool_round(g, [("Bash", huge_output(i))], prefix=f"c{i}", content=f"ran {i}", at=NOW)
    return g


def collapse_requests(tmp_path: Path, **overrides: object) -> list[SummaryRequest]:
    g = session()
    pol = policy(tmp_path, cascade=("collapse", "emergency"), always=(), **overrides)
    summarizer = Capturing()
    ContextEngine(g, pol, summarizer, budget=40_000, clock=clock).render()
    assert summarizer.requests
    return summarizer.requests


def texts(units: tuple[Unit, ...]) -> list[str]:
    return [str(item.message.get("content") or "") for unit in units for item in unit.items]


def test_a_collapse_request_sends_each_output_as_head_and_tail(tmp_path: Path) -> None:
    unbounded = {"summary_request_tokens": None, "summary_request_share": None}
    for request in collapse_requests(tmp_path, **unbounded):
        sent, stored = texts(request.units), texts(request.sources)
        assert len(sent) == len(stored) and request.sources
        for short, whole in zip(sent, stored, strict=True):
            assert len(short) <= Policy().summary_item_chars + 120  # the elision marker
            assert whole.startswith(short[:1_000])
        assert max(map(len, stored)) > 50_000
        assert not any(MIDDLE in text for text in sent)


def test_identifiers_are_still_ranked_from_the_whole_outputs(tmp_path: Path) -> None:
    requests = collapse_requests(tmp_path)
    result = HeuristicSummarizer().summarize(requests[0])
    assert MIDDLE in result.identifiers  # only the middle of the outputs named it


def test_the_request_is_bounded_in_tokens_and_charged_as_such(tmp_path: Path) -> None:
    counter = TokenCounter()
    unbounded = {"summary_request_tokens": None, "summary_request_share": None}
    whole = collapse_requests(tmp_path / "a", summary_item_chars=10**9, **unbounded)
    short = collapse_requests(tmp_path / "b", summary_request_tokens=3_000)
    shaper = LiteLLMSummarizer("x", max_input_tokens=200_000)

    def sent(request: SummaryRequest) -> int:
        return counter.count_messages(shaper.messages(request)[0])

    assert sent(whole[0]) > 50_000
    for request in short:
        assert sent(request) <= 3_000 + 1_000  # the template, the task and the notes


def test_a_request_over_the_bound_at_the_least_text_bound_is_sampled(tmp_path: Path) -> None:
    g = session(rounds=60)
    pol = policy(
        tmp_path, cascade=("compact", "emergency"), always=(), summary_request_tokens=2_000
    )
    summarizer = Capturing()
    ContextEngine(g, pol, summarizer, budget=20_000, clock=clock).render()
    counter = TokenCounter()
    shaper = LiteLLMSummarizer("x", max_input_tokens=200_000)
    sampled = [request for request in summarizer.requests if request.left_out]
    assert sampled, "the long stretch is sampled, not sent whole"
    for request in sampled:
        assert counter.count_messages(shaper.messages(request)[0]) <= 2_000 + 1_000
        assert request.units[-1] is not request.covered[-1]  # shortened, still the newest
        assert request.units[-1].position == request.covered[-1].position
        prompt = shaper.messages(request)[0][-1]["content"]
        assert f"{request.left_out} older exchanges of this stretch are left out" in prompt
        assert request.node_ids == [n for unit in request.covered for n in unit.node_ids]
        rounds = sum(unit.count for unit in request.covered if unit.kind == "round")
        prose = HeuristicSummarizer().summarize(request).prose
        assert f"Covered {rounds} rounds: {rounds} tool calls (Bash ×{rounds})" in prose


def test_a_short_conversation_is_sent_as_it_is(tmp_path: Path) -> None:
    g = ConversationGraph.memory("short")
    start(g)
    for i in range(16):
        g.append({"role": "user", "content": f"step {i}"}, at=NOW)
        tool_round(g, [("Bash", f"out {i}\n" * 40)], prefix=f"c{i}", content=f"ran {i}", at=NOW)
    # (no share of this tiny budget: under it, the 1,000-token floor would sample the rounds)
    pol = policy(tmp_path, cascade=("collapse", "emergency"), always=(), summary_request_share=None)
    summarizer = Capturing()
    full = ContextEngine(g, pol, budget=1_000_000, clock=clock).render().tokens
    ContextEngine(g, pol, summarizer, budget=full // 2, clock=clock).render()
    assert summarizer.requests
    assert all(request.sources == () for request in summarizer.requests)


def compact_requests(tmp_path: Path, budget: int, **overrides: object) -> list[SummaryRequest]:
    g = session(24)
    pol = policy(tmp_path, cascade=("compact", "emergency"), always=(), **overrides)
    summarizer = Capturing()
    ContextEngine(g, pol, summarizer, budget=budget, clock=clock).render()
    assert summarizer.requests
    return summarizer.requests


def test_a_large_budget_gives_a_compaction_more_identifiers_per_segment(tmp_path: Path) -> None:
    """``identifier_share``: 0.0125 of a 160k budget is 2,000 tokens per segment, five times
    the fixed 400 (within half the summary); at 32k the fixed cap holds."""
    wide = {"compact_summary_tokens": 20_000}
    scaled = compact_requests(tmp_path / "a", 160_000, **wide)[0]
    fixed = compact_requests(tmp_path / "b", 160_000, identifier_share=None, **wide)[0]
    half = scaled.max_tokens // 2
    assert fixed.max_tokens == scaled.max_tokens
    assert scaled.identifier_tokens > fixed.identifier_tokens
    assert scaled.identifier_tokens in {min(2_000 * k, half) for k in range(1, 10)}
    assert fixed.identifier_tokens in {min(400 * k, half) for k in range(1, 10)}
    small = compact_requests(tmp_path / "c", 32_000, **wide)[0]
    unscaled = compact_requests(tmp_path / "d", 32_000, identifier_share=None, **wide)[0]
    assert small.identifier_tokens == unscaled.identifier_tokens > 0
    assert Policy(identifier_tokens=0).identifier_cap(160_000) == 0  # lists off stay off
