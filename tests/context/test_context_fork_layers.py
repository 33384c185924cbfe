"""Forks and refinement (issue 23, item 5).

- a layer applies to a branch only where the branch holds all its covered nodes; otherwise
  it neither shows nor blocks: a fork collapses rounds its parent's layer covers in part;
- a manual collapse inside an active compaction refines it (the finer layer shows there,
  rolling it back restores the coarse prompt);
- a property over random forks, collapses, compactions, refinements and rollbacks: every
  branch renders within budget, every layer shown is whole on that branch, and rolling
  the layers back in any order restores exactly the projection from before them.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from _layer_helpers import clock, session
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from context import CommitConflict, ContextEngine, ContextError, Policy, tool_pair_problems
from graph import ConversationGraph, LayerConflict, LayerInfo, MemoryStore, layer_handle


def engine(g: ConversationGraph, folder: Path, **kwargs: Any) -> ContextEngine:
    return ContextEngine(
        g, Policy(), budget=1_000_000, clock=clock, state_dir=folder / "state", **kwargs
    )


def shown(rendered: Any, info: LayerInfo) -> bool:
    return f'expand_layer(\\"{layer_handle(info)}\\")' in json.dumps(rendered.messages)


def test_a_fork_collapses_rounds_its_parents_layer_covers_in_part(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    rounds = session(g, 10)
    e = engine(g, tmp_path)
    on_main = e.collapse(rounds[4][0], rounds[8][1])  # rounds 4-8, on main
    g.create_branch("fork", at=rounds[6][1])  # the fork holds rounds 0-6, not 7-8
    g.checkout("fork")
    session(g, 2, first=100)
    fork_head = g.head
    # main's layer is not the fork's: it neither shows there nor blocks a collapse of 2-5
    assert not shown(e.render(), on_main)
    mine = e.collapse(rounds[2][0], rounds[5][1])
    assert set(mine.covers) & set(on_main.covers) and mine.active
    on_fork = e.render()
    assert shown(on_fork, mine) and not shown(on_fork, on_main)
    assert tool_pair_problems(on_fork.messages) == []
    # main still shows its own layer, whole; the fork's layer does not apply there
    g.checkout("main")
    on_main_now = e.render()
    assert shown(on_main_now, on_main) and not shown(on_main_now, mine)
    assert "output line of step 2" in json.dumps(on_main_now.messages)
    # on one branch a partial overlap is still refused
    tail = [s.node.id for s in g.visible()]
    with pytest.raises(LayerConflict, match="only in part"):
        g.add_layer("collapse", tail[tail.index(rounds[7][0]) :], None)
    assert e.render(head=fork_head).messages == on_fork.messages


def test_a_manual_collapse_inside_a_compaction_refines_it(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    rounds = session(g, 14)
    e = engine(g, tmp_path)
    coarse = e.compact()
    before = e.render()
    assert "output line of step 3" not in json.dumps(before.messages)
    fine = e.collapse(rounds[3][0], rounds[5][1])
    assert fine.kind == "collapse" and fine.active and fine.builds_on == ()
    assert set(fine.covers) < set(coarse.covers) and e.layer(coarse.id).active
    refined = e.render()
    assert shown(refined, fine) and refined.messages != before.messages
    assert tool_pair_problems(refined.messages) == []
    assert [i.id for i in e.rollback(fine.id)] == [fine.id]
    assert e.render().messages == before.messages
    # a collapse that runs out of the compaction's span is still refused
    with pytest.raises(ContextError, match="cannot collapse a compaction"):
        e.collapse(rounds[3][0], rounds[13][1])


# -- property ---------------------------------------------------------------------------

BUDGET = 2_500
ops = st.lists(
    st.tuples(
        st.sampled_from(["append", "branch", "checkout", "collapse", "collapse", "compact"]),
        st.integers(0, 10_000),
        st.integers(0, 10_000),
    ),
    min_size=4,
    max_size=14,
)
later = st.lists(
    st.tuples(
        st.sampled_from(["checkout", "collapse", "collapse", "compact"]),
        st.integers(0, 10_000),
        st.integers(0, 10_000),
    ),
    min_size=1,
    max_size=6,
)


def heads(g: ConversationGraph) -> dict[str, str]:
    return {name: head for name, head in g.branches_by_name().items() if head is not None}


def walk_of(g: ConversationGraph, head: str) -> set[str]:
    return {s.node.id for s in g.visible(head=head)}


def round_nodes(g: ConversationGraph, head: str) -> list[tuple[str, str]]:
    """The (user, assistant) nodes of the rounds on the walk to ``head``."""
    steps = [s.node for s in g.visible(head=head) if s.view == "message"][2:]
    return [(u.id, a.id) for u, a in itertools.pairwise(steps) if u.role == "user"]


def act(
    g: ConversationGraph, e: ContextEngine, kind: str, a: int, b: int, w: dict[str, int]
) -> None:
    head = g.head
    if kind == "append":
        session(g, 1 + a % 3, first=w["rounds"], words=20)
        w["rounds"] += 3
    elif kind == "branch" and head is not None:
        pairs = round_nodes(g, head)
        if pairs:
            name = f"b{len(heads(g))}"
            g.create_branch(name, at=pairs[a % len(pairs)][1])
            g.checkout(name)
    elif kind == "checkout":
        names = sorted(heads(g))
        g.checkout(names[a % len(names)])
    elif kind == "collapse" and head is not None:
        pairs = round_nodes(g, head)
        if len(pairs) < 2:
            return
        start = a % len(pairs)
        end = start + b % (len(pairs) - start)
        try:
            info = e.collapse(pairs[start][0], pairs[end][1], head=head)
        except (CommitConflict, ContextError) as refused:
            event(f"a collapse was refused: {type(refused).__name__}")
            return
        if any(
            o.active and o.kind == "compact" and set(info.covers) < set(o.covers)
            for o in g.layers()
        ):
            event("a collapse refined a compaction")
        for other in g.layers(active=True):
            shared = set(other.covers) & set(info.covers)
            if shared and shared not in (set(other.covers), set(info.covers)):
                event("a layer crossing another branch's layer landed")
    elif kind == "compact" and head is not None:
        try:
            e.compact(head=head)
        except (CommitConflict, ContextError) as refused:
            event(f"a compaction was refused: {type(refused).__name__}")


def check(g: ConversationGraph, e: ContextEngine, plain: ContextEngine) -> None:
    for head in heads(g).values():
        walk = walk_of(g, head)
        rendered = e.preview(head=head)
        assert rendered.tokens <= BUDGET
        assert tool_pair_problems(rendered.messages) == []
        for view in (rendered, plain.preview(head=head)):
            for info in g.layers(active=True):
                if shown(view, info):  # every layer shown is whole on this branch
                    assert set(info.covers) <= walk, info.id


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops, later, st.randoms(use_true_random=False))
def test_layers_over_random_forks_compactions_and_rollbacks(
    steps: list[Any], more: list[Any], order: Any
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        g = ConversationGraph(MemoryStore(), "s1")
        w = {"rounds": 8}
        session(g, 8, words=20)
        policy = Policy.claude_code("gpt-4o")
        e = ContextEngine(g, policy, budget=BUDGET, clock=clock, state_dir=Path(folder))
        plain = ContextEngine(
            g, Policy(), budget=1_000_000, clock=clock, tiers=[], state_dir=Path(folder)
        )
        for kind, a, b in steps:
            act(g, e, kind, a, b, w)
            if g.head is not None:
                e.render(head=g.head)
            check(g, e, plain)
        projected = {name: plain.preview(head=h).messages for name, h in heads(g).items()}
        known = {i.id for i in g.layers()}
        for kind, a, b in more:  # layers over the same graph, then undone in any order
            act(g, e, kind, a, b, w)
            check(g, e, plain)
        made = [i.id for i in g.layers(active=True) if i.id not in known]
        order.shuffle(made)
        for layer_id in made:
            if g.layer(layer_id).active:
                plain.rollback(layer_id)
                check(g, e, plain)
        if made:
            event("layers were rolled back in a random order")
        assert {n: plain.preview(head=h).messages for n, h in heads(g).items()} == projected
