"""The cache schedule: its choices on constructed inputs, its floor and budget invariants,
its policy fields, and the ``working`` schedule rendering today's prompts."""

from __future__ import annotations

import os

import pytest
from _context_helpers import Stable, start, tool_round
from _layer_helpers import NOW, clock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context import (
    ContextEngine,
    HeuristicSummarizer,
    Policy,
    PolicyError,
    cache_schedule,
    cost_per_turn,
    plan_for,
)
from graph import ConversationGraph

PRICES = {"read": 0.1, "write": 1.25}
SETTING = {"trigger": 32_000, "ceiling": 24_000, "prefix": 2_000, "summary": 24_000}


@pytest.fixture(autouse=True)
def _no_policy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in list(os.environ):
        if variable.startswith("OPENPROGRAM_") and variable != "OPENPROGRAM_TEST_PG_URL":
            monkeypatch.delenv(variable)


def headroom(growth: float, floor: int = 8_000, **prices: float) -> int:
    plan = cache_schedule(**SETTING, growth=growth, floor=floor, **{**PRICES, **prices})
    return plan.trigger - plan.target


# -- the schedule's choices -------------------------------------------------------------


def test_a_fast_growing_session_compacts_deeper_below_its_trigger() -> None:
    slow, fast = headroom(100), headroom(1_500)
    assert slow < fast
    assert cache_schedule(**SETTING, growth=100, floor=8_000, **PRICES).trigger < 32_000
    assert cache_schedule(**SETTING, growth=1_500, floor=8_000, **PRICES).trigger == 32_000


def test_dear_rewrites_make_fewer_deeper_compactions_and_dear_reads_earlier_ones() -> None:
    """When a rewrite costs much against a read, a compaction waits for more headroom (fewer
    rewrites); when reads cost more, it comes earlier (a smaller prompt re-read each turn)."""
    assert headroom(200, write=2.0) > headroom(200) > headroom(200, write=0.2)
    assert headroom(200, read=0.2) < headroom(200)


def test_the_target_is_the_floor_never_below_it_nor_over_the_ceiling() -> None:
    for floor in (1_000, 8_000, 16_000):
        assert cache_schedule(**SETTING, growth=500, floor=floor, **PRICES).target == floor
    assert cache_schedule(**SETTING, growth=500, floor=40_000, **PRICES).target == 24_000


def test_keeping_more_than_the_floor_never_costs_less() -> None:
    """Why the target is the floor: at every headroom, a larger kept prompt costs more."""
    common = {"prefix": 2_000, "growth": 700, "summary": 24_000, **PRICES}
    for room in (2_000, 8_000, 20_000):
        costs = [cost_per_turn(kept, room, **common) for kept in (4_000, 8_000, 16_000)]
        assert costs == sorted(costs)


@given(
    trigger=st.integers(1, 400_000),
    ceiling=st.integers(1, 400_000),
    prefix=st.integers(0, 50_000),
    growth=st.floats(0, 50_000),
    summary=st.floats(0, 100_000),
    floor=st.integers(1, 400_000),
    read=st.floats(0.01, 1.0),
    extra=st.floats(0.01, 5.0),
)
def test_a_plan_keeps_the_floor_and_triggers_within_the_policy(
    trigger: int,
    ceiling: int,
    prefix: int,
    growth: float,
    summary: float,
    floor: int,
    read: float,
    extra: float,
) -> None:
    write = read + extra
    plan = cache_schedule(
        trigger=trigger,
        ceiling=ceiling,
        prefix=prefix,
        growth=growth,
        summary=summary,
        floor=floor,
        read=read,
        write=write,
    )
    assert plan.target == max(1, min(floor, ceiling, trigger))
    assert plan.target <= plan.trigger <= trigger
    if plan.target < plan.trigger < trigger:  # an early trigger is the cheapest headroom
        chosen = plan.trigger - plan.target
        common = {"prefix": prefix, "growth": growth, "summary": summary}
        best = cost_per_turn(plan.target, chosen, **common, read=read, write=write)
        for other in (chosen // 2, chosen * 2):
            if max(2 * growth, trigger / 8) <= other <= trigger - plan.target:
                cost = cost_per_turn(plan.target, other, **common, read=read, write=write)
                assert best <= cost + 1e-6


# -- in a session -----------------------------------------------------------------------


def live_prompts(
    policy: Policy, budget: int, sizes: list[int]
) -> tuple[list[list[dict[str, object]]], list[int], ContextEngine]:
    """Every prompt of a live loop (one render after each round of ``sizes`` lines of a tool
    no tier clears), its tokens, and the engine."""
    g = ConversationGraph.memory("s1")
    start(g, system="You are a careful coding agent.", task="Fix the failing parser test.")
    engine = ContextEngine(g, policy, HeuristicSummarizer(), budget=budget, clock=clock)
    prompts, tokens = [], []
    for i, size in enumerate(sizes):
        g.append({"role": "user", "content": f"step {i}: check src/mod_{i}.py"})
        output = "".join(f"line {j} of mod_{i}\n" for j in range(size))
        tool_round(g, [("lookup", output)], prefix=f"c{i}", content=f"I use approach_{i}.", at=NOW)
        rendered = engine.render()
        prompts.append(list(rendered.messages))
        tokens.append(rendered.tokens)
    return prompts, tokens, engine


FIXED = [40 + (i * 37) % 300 for i in range(90)]
"""A fixed history: 90 rounds of a tool no tier clears, each 40–340 lines."""

TODAY = [5, 8, 11, 14, 17, 20, 23, 26, 29, 32, 35, 38, 41, 44, 47, 50, 53, 56, 59, 62, 36, 39]
TODAY += [42, 45, 48, 51, 54, 57, 60, 63, 66, 69, 31, 34, 37, 40, 43, 46, 49, 52, 55, 58, 61]
TODAY += [64, 67, 70, 36, 39, 42, 45, 48, 51, 54, 57, 60, 63, 66, 69, 72, 37, 40, 43, 46, 49]
TODAY += [52, 55, 58, 61, 64, 67, 70, 36, 39, 42, 45, 48, 51, 54, 57, 60, 63, 66, 69, 72, 75]
TODAY += [36, 39, 42, 45, 48]
"""The message count of each prompt of ``FIXED`` at 30k, rendered by main before the cache
schedule existed (the same prompts byte for byte, node ids aside, were checked then)."""


def test_the_working_schedule_renders_todays_prompts() -> None:
    working = live_prompts(Policy(schedule="working"), 30_000, FIXED)[0]
    assert [len(p) for p in working] == TODAY
    other = Policy(
        schedule="working",
        schedule_floor_tokens=3_000,
        schedule_floor_share=None,
        cache_read_price=0.5,
        cache_write_price=3.0,
    )
    assert Stable()(live_prompts(other, 30_000, FIXED)[0]) == Stable()(working)
    cache = live_prompts(Policy(schedule="cache"), 30_000, FIXED)[0]
    assert [len(p) for p in cache] != TODAY  # the test can tell the schedules apart


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(5, 600), min_size=4, max_size=40),
    budget=st.integers(6_000, 40_000),
    floor=st.integers(500, 30_000),
)
def test_a_cache_scheduled_prompt_fits_keeps_the_newest_round_and_the_floor(
    sizes: list[int], budget: int, floor: int
) -> None:
    policy = Policy(
        schedule="cache",
        schedule_floor_tokens=floor,
        schedule_floor_share=None,
        schedule_floor_exponent=None,
    )
    prompts, tokens, engine = live_prompts(policy, budget, sizes)
    assert max(tokens) <= budget
    for i, prompt in enumerate(prompts):
        assert f"I use approach_{i}." in [m.get("content") for m in prompt]
    ctx, _, _ = engine.context(preview=True)
    ceiling = int(budget * policy.low_water)  # under the trigger (the budget) here
    assert ctx.target == plan_for(policy, budget, ctx.units).target == min(floor, ceiling)
    assert ctx.threshold("compact") <= budget


@pytest.mark.parametrize(
    ("budget", "scaled", "fixed"),
    [(8_000, 5_278, 6_000), (16_000, 9_189, 12_000), (32_000, 16_000, 16_000)],
)
def test_the_floor_shrinks_under_its_reference_budget(budget: int, scaled: int, fixed: int) -> None:
    """Under ``schedule_floor_budget`` the floor is ``schedule_floor_tokens`` times the budget's
    share of it to ``schedule_floor_exponent`` (8k kept 75% of its budget before); from that
    budget on, and with the exponent off, the fixed floor under ``low_water`` as before."""
    sizes = [400] * 30
    for policy, target in ((Policy(), scaled), (Policy(schedule_floor_exponent=None), fixed)):
        engine = live_prompts(policy, budget, sizes)[2]
        assert engine.context(preview=True)[0].target == target


def test_a_large_budget_keeps_a_fifth_of_it() -> None:
    """``schedule_floor_share`` 0.2 (0.25 before): 32k kept at 160k; the identifiers its
    summaries and placeholders list (``identifier_share``) pay for the 8k less."""
    sizes = [400] * 30
    for policy, target in ((Policy(), 32_000), (Policy(schedule_floor_share=0.25), 40_000)):
        engine = live_prompts(policy, 160_000, sizes)[2]
        assert engine.context(preview=True)[0].target == target


# -- the policy's fields ----------------------------------------------------------------


def test_the_presets_use_the_cache_schedule_and_working_stays_selectable() -> None:
    assert Policy().schedule == Policy.progressive().schedule == "cache"
    assert Policy.claude_code(schedule="working").schedule == "working"
    stored = Policy(schedule="working", schedule_floor_tokens=9_000).stored()
    assert Policy.restore(stored).schedule_floor_tokens == 9_000


def test_the_schedule_fields_are_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(PolicyError, match="schedule"):
        Policy(schedule="eager")
    with pytest.raises(PolicyError, match="schedule_floor_tokens"):
        Policy(schedule_floor_tokens=0)
    with pytest.raises(PolicyError, match="schedule_floor_share"):
        Policy(schedule_floor_share=1.5)
    with pytest.raises(PolicyError, match="cache_read_price must be below cache_write_price"):
        Policy(cache_read_price=1.25, cache_write_price=1.0)
    with pytest.raises(PolicyError, match="cache_write_price"):
        Policy(cache_write_price=-1)
    assert Policy(schedule_floor_share=None).schedule_floor_share is None
    monkeypatch.setenv("OPENPROGRAM_SCHEDULE", "working")
    assert Policy().schedule == "working"
