"""The claude-code preset makes room from the old outputs first, as the peer does.

Once a prompt is over budget, every compactable output but the newest
``microcompact_keep`` is cleared to a pointer note in one batch, before budget reduction
would cut the middle of the newest ones; the batch leaves room, so the turns after it append
under a byte-stable prefix until the prompt fills again."""

from __future__ import annotations

from typing import Any

from _context_helpers import WITH_COLLAPSE, start, tool_round
from _layer_helpers import NOW, clock
from hypothesis import given, settings
from hypothesis import strategies as st

from context import TIERS, ContextEngine, Policy, tool_pair_problems
from graph import ConversationGraph

BUDGET = 16_000


def output(i: int, lines: int = 90) -> str:
    return "".join(
        f"src/pkg/module_{i}.py:{n}: value_{i}_{n} = compute_{n}()\n" for n in range(lines)
    )


def session(rounds: int, lines: int = 90) -> ConversationGraph:
    g = ConversationGraph.memory("clearing")
    start(g)
    for i in range(rounds):
        tool_round(g, [("Bash", output(i, lines))], prefix=f"c{i}", content=f"step {i}", at=NOW)
    return g


def tool_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m["content"]) for m in messages if m["role"] == "tool"]


def test_old_outputs_are_cleared_and_the_newest_stay_whole() -> None:
    g = session(24)
    rendered = ContextEngine(
        g,
        Policy(offload_chars_per_token=None, schedule_floor_exponent=None),
        budget=BUDGET,
        clock=clock,
    ).render()
    assert rendered.tokens <= BUDGET < sum(len(output(i)) for i in range(24)) // 4
    outputs = tool_texts(rendered.messages)
    keep = Policy().microcompact_keep
    assert outputs[-keep:] == [output(i) for i in range(24 - keep, 24)]  # whole, not cut
    assert all("output cleared; read_output(" in text for text in outputs[:-keep])
    tiers = [a.tier for a in rendered.actions]
    assert "microcompact" in tiers and "budget_reduction" not in tiers


def test_the_turns_after_a_clearing_keep_its_prefix() -> None:
    g = session(24)
    engine = ContextEngine(g, Policy(), budget=BUDGET, clock=clock)
    first = engine.render().messages
    for i in range(24, 27):  # three more rounds, still under budget
        tool_round(g, [("Bash", output(i, 20))], prefix=f"c{i}", content=f"step {i}", at=NOW)
        rendered = engine.render()
        assert rendered.messages[: len(first)] == first
        assert rendered.records == []  # nothing new decided: the batch left room
        first = rendered.messages


def test_with_the_count_trigger_budget_reduction_cuts_the_newest_instead() -> None:
    """Claude Code's own thresholds (first clearing at 50 tool calls) and budget reduction
    before the summarizing tiers: the newest outputs are what is cut when the prompt does
    not fit."""
    g = session(24)
    counted = Policy(microcompact_first=50, microcompact_every=25, cascade=WITH_COLLAPSE)
    rendered = ContextEngine(g, counted, budget=BUDGET, clock=clock).render()
    assert "characters elided" in tool_texts(rendered.messages)[-1]


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 400), min_size=1, max_size=30),
    budget=st.integers(2_000, 20_000),
    keep=st.integers(0, 6),
)
def test_the_budget_and_tool_pairs_hold_whatever_the_outputs(
    sizes: list[int], budget: int, keep: int
) -> None:
    g = ConversationGraph.memory("clearing-property")
    start(g)
    policy = Policy(microcompact_keep=keep)
    engine = ContextEngine(g, policy, budget=budget, clock=clock)
    for i, lines in enumerate(sizes):
        tool_round(g, [("Bash", output(i, lines))], prefix=f"c{i}", content=f"step {i}", at=NOW)
        rendered = engine.render()
        assert rendered.tokens <= budget
        assert tool_pair_problems(rendered.messages) == []
        assert rendered.messages[1]["content"] == "Fix the bug."  # the task is kept


class Counting:
    """The heuristic summarizer, counting its calls."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, request: Any) -> Any:
        from context import HeuristicSummarizer

        self.calls += 1
        return HeuristicSummarizer().summarize(request)


def test_what_clearing_cannot_free_is_compacted_once_and_then_left_to_fill() -> None:
    g = ConversationGraph.memory("talkative")
    start(g)
    said = "I checked src/pkg/module_{i}.py and the value_{i} path looks right. " * 12
    for i in range(40):
        lines = 90 if i == 39 else 5  # the newest output is long: compaction makes the room
        tool_round(g, [("Bash", output(i, lines))], prefix=f"c{i}", content=said.format(i=i), at=NOW)  # fmt: skip
    summarizer = Counting()
    engine = ContextEngine(g, Policy(), summarizer, budget=8_000, clock=clock)
    rendered = engine.render()
    assert rendered.tokens <= Policy().target(8_000)
    assert summarizer.calls == 1 and [i.kind for i in g.layers()] == ["compact"]
    assert tool_texts(rendered.messages)[-1] == output(39, 90)  # not cut: it fits
    first = rendered.messages
    for i in range(40, 43):
        tool_round(g, [("Bash", output(i, 5))], prefix=f"c{i}", content=f"step {i}", at=NOW)
        rendered = engine.render()
        assert rendered.messages[: len(first)] == first and rendered.records == []
        first = rendered.messages
    assert summarizer.calls == 1


def test_a_clearing_that_changes_nothing_shown_is_not_recorded() -> None:
    """Outputs shorter than their pointer note stay as they are: no record says a tier
    acted on a render whose actions do not name it (a trace's span lists those)."""
    g = ConversationGraph.memory("tiny")
    start(g)
    for i in range(12):
        tool_round(g, [("Bash", "ok")], prefix=f"c{i}", content="word " * 200, at=NOW)
    rendered = ContextEngine(g, Policy(), budget=2_000, clock=clock).render()
    acted = {a.tier for a in rendered.actions}
    assert "microcompact" not in {r.tier for r in rendered.records}
    assert {r.tier for r in rendered.records} <= acted


def test_budget_reduction_never_cuts_a_prompt_that_fits_down_to_the_low_water_mark() -> None:
    """After a tier made the prompt fit, the hysteresis goes on towards the low-water mark;
    budget reduction is not part of that (its cuts lose the newest outputs' middles)."""
    budget_reduction = TIERS["budget_reduction"].compact  # the tier run alone
    assert budget_reduction is not None
    g = session(3)  # three outputs of ~1,800 tokens, each over budget_reduction_chars
    engine = ContextEngine(g, Policy(), budget=1_000_000, clock=clock)
    ctx, view, _ = engine.context()
    ctx.tier = "budget_reduction"
    ctx.budget = view.tokens + 1  # it fits, over the low-water mark: nothing is cut
    assert view.tokens > ctx.target and budget_reduction(view, ctx) is view
    ctx.budget = view.tokens - 1  # it does not fit: the long outputs are cut
    assert budget_reduction(view, ctx).tokens < view.tokens
    seed = Policy(always=("offload", "budget_reduction"))  # every turn, as the seed did
    engine = ContextEngine(g, seed, budget=1_000_000, clock=clock)
    assert "budget_reduction" in {a.tier for a in engine.render().actions}
