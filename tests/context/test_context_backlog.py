"""The first render of a long history makes one compaction of its backlog, in a few bounded
summary requests, and tokenizes only what it keeps; later renders and fresh engines go on
from it as from any compaction."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _fake_provider import FakeProvider
from _layer_helpers import Counting, clock, encode

from context import (
    TIERS,
    ContextEngine,
    HeuristicSummarizer,
    LiteLLMSummarizer,
    Policy,
    SummaryRequest,
    SummaryResult,
    TokenCounter,
)
from graph import ConversationGraph, seeded_ids

BUDGET = 16_000
MAX_REQUESTS = 8  # the backlog's summary requests at most (each bounded)
REPLY = """\
## Anchors
### User Intent
- Make the test suite pass
### Execution Progress
- ran the tests of every module; parse_header fails on empty lines
### Key Decisions
- fix parse_header rather than the tests
### Tried Solutions
- N/A
### Next Steps
- patch src/app/parse.py
## Summary
The suite was run module by module."""
ROUNDS = 600


def history(g: ConversationGraph, rounds: int = ROUNDS, first: int = 0) -> None:
    """A coding agent's session: a user turn, a tool call, its output (~250 tokens)."""
    if first == 0:
        g.append({"role": "system", "content": "You are a careful coding agent."})
        g.append({"role": "user", "content": "Make the test suite pass."})
    for turn in range(first, first + rounds):
        g.append({"role": "user", "content": f"step {turn}: run the tests"})
        call = {"name": "bash", "arguments": json.dumps({"cmd": f"pytest tests/t{turn}.py"})}
        g.append(
            {
                "role": "assistant",
                "content": f"Running the tests of module {turn}.",
                "tool_calls": [{"id": f"c{turn}", "type": "function", "function": call}],
            }
        )
        output = "".join(f"{turn}:{line} src/app/module_{line % 7}.py ok\n" for line in range(30))
        g.append({"role": "tool", "tool_call_id": f"c{turn}", "content": output})


class Recording(HeuristicSummarizer):
    """The heuristic summarizer, keeping every request it was asked."""

    __slots__ = ("requests",)

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.requests.append(request)
        return super().summarize(request)


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[ConversationGraph]:
    g = ConversationGraph.open(tmp_path / "op.db", session="s1")
    history(g)
    try:
        yield g
    finally:
        g.close()


def engine(g: ConversationGraph, summarizer: Any = None, **policy: Any) -> ContextEngine:
    return ContextEngine(g, Policy(**policy), summarizer, budget=BUDGET, clock=clock)


def backlog_layers(g: ConversationGraph) -> list[Any]:
    return [i for i in g.layers() if i.active and i.layer.meta.get("reason") == "backlog"]


def test_the_first_render_makes_one_compaction_in_a_few_bounded_requests(
    graph: ConversationGraph,
) -> None:
    summarizer = Recording()
    rendered = engine(graph, summarizer).render()
    assert rendered.fits
    [layer] = graph.layers()
    assert layer.kind == "compact" and layer.layer.meta["reason"] == "backlog"
    assert 1 < len(summarizer.requests) <= MAX_REQUESTS
    bound = Policy().backlog_request_tokens
    counter = TokenCounter()
    for request in summarizer.requests:  # bounded by an estimate: never a huge call
        estimated = sum(item.tokens for unit in request.units for item in unit.items)
        assert estimated <= bound * 1.1
        assert counter.count_messages(request.messages) <= 2 * bound
    assert summarizer.requests[1].previous is not None  # each builds on the last
    # a tenth of ~150k replaced tokens, at most a third of the low-water mark (9,189: the
    # cache schedule's floor at 16k, 16,000 * (16k / 32k) ** 0.8)
    assert {r.max_tokens for r in summarizer.requests} == {3_063}
    covered = set(layer.covers)
    assert sum(len(r.units) for r in summarizer.requests) < len(covered) // 3  # sampled
    last = graph.get(graph.default_head())
    assert last.id not in covered
    newest = f"{ROUNDS - 1}:29 src/app/module_1.py ok\n"
    assert rendered.messages[-1]["content"].endswith(newest)  # the newest output kept whole
    assert rendered.messages[0]["role"] == "system"
    assert "[Context Compaction]" in json.dumps(rendered.messages)
    [record] = [r for r in rendered.records if r.tier == "compact"]
    assert record.details["reason"] == "backlog"
    assert len(record.details["requests"]) == len(summarizer.requests)


def test_only_what_the_prompt_shows_is_tokenized(graph: ConversationGraph) -> None:
    e = engine(graph)
    e.render()
    [layer] = graph.layers()
    outputs = {n for n in layer.covers if graph.get(n).kind == "tool"}
    counted = {key.partition(":")[0] for key, _ in e.cache.items()}
    assert len(outputs) > 300
    assert len(outputs & counted) <= 1  # the round just before the kept ones was weighed


def test_a_fresh_engine_and_the_next_turns_go_on_from_the_compaction(
    graph: ConversationGraph,
) -> None:
    first = engine(graph)
    rendered = first.render()
    fresh = engine(graph)
    assert encode(fresh.render()) == encode(rendered)
    assert fresh._frames[None].layout.hidden is not None  # started from the checkpoint
    assert len(graph.layers()) == 1
    history(graph, 1, first=ROUNDS)
    after = first.render()
    assert after.messages[: len(rendered.messages)] == rendered.messages  # an append only
    assert len(graph.layers()) == 1


def test_a_preview_decides_it_and_keeps_nothing(graph: ConversationGraph) -> None:
    e = engine(graph)
    with seeded_ids("layers"):  # the same new layer id both times: ids tokenize unevenly
        previewed = e.preview()
    assert not graph.layers(active=False) and not graph.layers()
    with seeded_ids("layers"):
        rendered = e.render()
    [layer] = graph.layers()
    assert previewed.records[0].details["layer"] == layer.id
    assert rendered.messages == previewed.messages
    assert rendered.tokens == previewed.tokens


def test_rolling_it_back_gives_the_history_to_the_cascade(graph: ConversationGraph) -> None:
    e = engine(graph, Counting())
    e.render()
    [layer] = graph.layers()
    e.rollback(layer.id)
    rendered = e.render()
    assert rendered.fits
    assert not backlog_layers(graph)  # never made again once the session has layers


def test_a_failing_summarizer_leaves_the_history_to_the_cascade(
    graph: ConversationGraph,
) -> None:
    class Down:
        name = "down"

        def summarize(self, request: SummaryRequest) -> SummaryResult:
            raise RuntimeError("summarizer backend is down")

    rendered = engine(graph, Down()).render()
    assert rendered.fits
    assert not backlog_layers(graph)
    assert any(r.error and "backend is down" in r.error for r in rendered.records)


def test_a_history_that_fits_a_few_budgets_goes_through_the_cascade(tmp_path: Path) -> None:
    g = ConversationGraph.open(tmp_path / "short.db", session="s1")
    history(g, 60)
    engine(g).render()
    assert not backlog_layers(g)
    long = ConversationGraph.open(tmp_path / "long.db", session="s1")
    history(long)
    engine(long, backlog_budgets=None).render()
    assert not backlog_layers(long)
    g.close()
    long.close()


def test_a_cascade_without_compaction_never_makes_one(graph: ConversationGraph) -> None:
    cascade = ("offload", "budget_reduction", "microcompact", "collapse", "snip", "emergency")
    engine(graph, cascade=cascade).render()
    assert not backlog_layers(graph)


def test_a_history_with_functions_is_compacted_from_the_full_walk(tmp_path: Path) -> None:
    """A function in the span: the chain is not a plain run of rounds, so the backlog is
    found on the full walk instead, with the same result: one layer, the newest kept."""
    g = ConversationGraph.open(tmp_path / "fn.db", session="s1")
    history(g, 20)
    with g.function("lookup", expose="io") as fn:
        g.append({"role": "assistant", "content": "looking it up"})
        fn.output = "found it"
    history(g, ROUNDS, first=20)
    e = engine(g)
    rendered = e.render()
    assert rendered.fits
    [layer] = backlog_layers(g)
    assert fn.id in layer.covers
    assert "expand_function" in layer.layer.replacement[-1]["content"]
    assert encode(engine(g).render()) == encode(rendered)
    g.close()


def test_an_llm_summarizer_gets_a_few_bounded_calls_on_the_wire(
    graph: ConversationGraph, fake_provider: FakeProvider
) -> None:
    """The backlog of 600 rounds (~150k tokens) with a real LLM summarizer over HTTP: at
    most ``MAX_REQUESTS`` calls, each a bounded prompt, never one huge call."""
    for _ in range(MAX_REQUESTS):
        fake_provider.reply(REPLY, prompt_tokens=3_000, completion_tokens=200)
    summarizer = LiteLLMSummarizer(
        "openai/fake-summarizer", api_base=fake_provider.base_url, api_key="x", max_retries=0
    )
    # no summary prepared ahead in the background: only the backlog's calls on the wire
    rendered = engine(graph, summarizer, proactive_share=None).render()
    assert rendered.fits
    [layer] = backlog_layers(graph)
    calls = fake_provider.requests
    assert 1 < len(calls) <= MAX_REQUESTS
    counter = TokenCounter()
    bound = Policy().backlog_request_tokens
    for call in calls:
        assert counter.count_messages(call.body["messages"]) <= 2 * bound + 2_000
    assert "parse_header" in layer.layer.replacement[-1]["content"]
    [record] = [r for r in rendered.records if r.tier == "compact"]
    assert record.details["summarizer"]["tokens_in"] == 3_000 * len(calls)


def test_collapse_after_a_compaction_acts_only_over_the_budget(tmp_path: Path) -> None:
    """In the claude-code order (compact, then collapse) collapse is the fallback for a
    prompt still over the budget, never a follow-up that takes one under it down to the
    low-water mark (each collapse rewrites the prompt from its segment on); first in the
    cascade, it does that as before."""
    g = ConversationGraph.open(tmp_path / "order.db", session="s1")
    history(g, 60)

    def collapsed(cascade: tuple[str, ...]) -> bool:
        policy = Policy(working_tokens=3_000, cascade=cascade)
        e = ContextEngine(g, policy, budget=60_000, clock=clock)
        ctx, view, _ = e.context()
        assert ctx.target < view.tokens < ctx.budget
        ctx.tier = "collapse"
        collapse = TIERS["collapse"].compact  # the tier run alone
        assert collapse is not None
        return collapse(view, ctx) is not view

    assert not collapsed(("offload", "compact", "collapse", "snip"))
    assert collapsed(("offload", "collapse", "compact", "snip"))
    g.close()
