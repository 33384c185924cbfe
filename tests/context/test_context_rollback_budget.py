"""A rollback, then renders under any budget: the rounds it restored show again where they
fit, and a render never goes over the budget for them (the cascade hides what it must)."""

from __future__ import annotations

from _context_helpers import start, tool_round
from _layer_helpers import clock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context import COLLAPSE_FIRST_CASCADE, ContextEngine, Policy
from graph import ConversationGraph

REMOVED = "earlier round(s) were removed"


def _rounds(g: ConversationGraph, sizes: list[int], first: int = 0, tool: str = "lookup") -> None:
    for i, size in enumerate(sizes, first):
        g.append({"role": "user", "content": f"step {i}: check src/mod_{i}.py"})
        output = (f"line {i} of the output\n" * (size // 22 + 1))[:size]
        tool_round(g, [(tool, output)], prefix=f"c{i}", content=f"reading mod_{i}")


def _session(
    sizes: list[int], policy: Policy | None = None, tool: str = "lookup"
) -> tuple[ConversationGraph, ContextEngine]:
    g = ConversationGraph.memory("p1")
    start(g)
    _rounds(g, sizes, tool=tool)
    return g, ContextEngine(g, policy or Policy.claude_code(), budget=4_000, clock=clock)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(100, 1_500), min_size=8, max_size=30),
    tight=st.integers(600, 4_000),
    after=st.integers(600, 40_000),
    tool=st.sampled_from(["lookup", "Read"]),  # Read: microcompact clears its outputs
)
def test_rolling_back_then_rendering_never_exceeds_the_budget(
    sizes: list[int], tight: int, after: int, tool: str
) -> None:
    g, e = _session(sizes, tool=tool)
    e.render()
    e.budget = tight
    e.render()
    layers = [i for i in g.layers(active=True) if not i.layer.builds_on]
    e.budget = after
    for info in layers:
        if g.layer(info.id).active:
            e.rollback(info.id)
        rendered = e.render()
        assert rendered.tokens <= after or not rendered.floor_fits
    g.append({"role": "user", "content": "and now?"})
    rendered = e.render()
    assert rendered.tokens <= after or not rendered.floor_fits


def test_a_rollback_with_room_shows_every_restored_round_without_a_snip_note() -> None:
    g, e = _session([900] * 20)
    e.render()
    e.budget = 900
    assert REMOVED in str(e.render().messages)  # the tight turn snipped the compaction
    compaction = next(i for i in g.layers() if i.kind == "compact")
    e.budget = 60_000
    e.rollback(compaction.id)
    sent = e.render().messages
    shown = {m.get("content") for m in sent}
    covered = [g.get(n) for n in compaction.covers]
    assert [n.id for n in covered if n.role == "user" and n.payload.content not in shown] == []  # type: ignore[union-attr]
    assert REMOVED not in str(sent)


def test_collapse_takes_a_rolled_back_compactions_rounds_last() -> None:
    """With collapse before auto-compact, rounds a rolled-back compaction restored are left
    whole while newer segments can make the room."""
    policy = Policy.claude_code(
        cascade=COLLAPSE_FIRST_CASCADE,
        schedule_floor_exponent=None,
        offload_chars_per_token=None,
        collapse_min_rounds=2,
        collapse_max_rounds=3,
        collapse_keep_recent=3,
    )
    g, e = _session([1_000] * 12, policy)
    e.budget = 1_000_000
    compaction = e.compact()
    e.rollback(compaction.id)
    _rounds(g, [1_000] * 12, first=12)
    full = e.preview().tokens
    e.budget = int(full * 0.95)
    rendered = e.render()
    made = [i for i in g.layers(active=True) if i.kind == "collapse"]
    assert made and rendered.tokens <= e.budget
    assert all(set(compaction.covers).isdisjoint(i.covers) for i in made)
