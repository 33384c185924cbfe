"""Branches and layers (issue 13, item 4).

- named branches: main's head moves only by appends on main and an explicit checkout;
- a layer covers a span of one branch's history: a fork sees its ancestors' layers where
  it holds all their nodes and compacts its own part freely, and a layer on one branch
  never blocks the other (collapse/compact on a fork failed with "overlaps … in part");
- refinement: a newer layer inside an active one shows there, the older one once, and
  rolling the refinement back restores the coarse prompt exactly;
- a property over random forks, layers, refinements and rollbacks.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from _layer_helpers import clock, session
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from context import ContextEngine, Policy, tool_pair_problems
from graph import (
    ConversationGraph,
    GraphError,
    LayerConflict,
    LayerInfo,
    MemoryStore,
    SQLStore,
    layer_handle,
)


def engine(g: ConversationGraph, folder: Path, **overrides: Any) -> ContextEngine:
    return ContextEngine(
        g, Policy(**overrides), budget=1_000_000, clock=clock, state_dir=folder / ".openprogram"
    )


def round_ids(g: ConversationGraph, head: str | None = None) -> list[list[str]]:
    """Node ids per round on the walk to ``head`` (user, assistant, tool)."""
    walk = [s.node.id for s in g.visible(head=head) if s.view in ("message", "tool")][2:]
    return [walk[i : i + 3] for i in range(0, len(walk), 3)]


def said(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def text(rendered: Any) -> str:
    return json.dumps(rendered.messages)


# -- named branches ------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/op.db"
    found: str = request.getfixturevalue("pg_db_url")
    return found


def test_main_moves_only_by_its_own_appends_and_checkout(url: str) -> None:
    g = ConversationGraph(SQLStore(url), "s1")
    ids = session(g, 4)
    main_head = g.head
    assert g.branch == "main" and g.branches_by_name() == {"main": main_head}
    assert g.create_branch("retry", at=ids[1][1]) == "retry"
    with pytest.raises(GraphError, match="exists"):
        g.create_branch("retry", at=ids[0][1])
    assert g.checkout("retry") == ids[1][1]
    tip = g.append({"role": "user", "content": "try another way"}).id
    assert g.branches_by_name() == {"main": main_head, "retry": tip}
    # another process opens the session on main: appends on "retry" never moved it
    other = ConversationGraph(SQLStore(url), "s1")
    assert other.head == main_head and other.branch == "main"
    assert other.branches_by_name()["retry"] == tip
    more = other.append({"role": "user", "content": "on main"}).id
    assert g.checkout("main") == more and g.head == more
    assert g.checkout("retry") == tip
    with pytest.raises(GraphError, match="no branch 'nope'"):
        g.checkout("nope")


# -- layers per branch ------------------------------------------------------------------


def forked(g: ConversationGraph) -> tuple[list[list[str]], list[list[str]], str]:
    """Twelve rounds on main, a branch from round 5 with six rounds of its own."""
    session(g, 12)
    main = round_ids(g)
    g.create_branch("fork", at=main[5][1])
    g.checkout("fork")
    session(g, 6, first=100)
    fork = round_ids(g)
    assert fork[:6] == main[:6]
    fork_head = g.head
    assert fork_head is not None
    g.checkout("main")
    return main, fork, fork_head


def test_a_layer_on_main_never_blocks_collapse_or_compact_on_a_fork(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    main, fork, fork_head = forked(g)
    on_main = g.add_layer("collapse", [n for r in main[3:9] for n in r], said("main 3-8"))
    e = engine(g, tmp_path)
    # the fork holds main's rounds 3-5 only: main's layer does not apply there …
    assert "main 3-8" not in text(e.render(head=fork_head))
    # … and its own collapse over rounds 2-7 of the fork lands (it used to be refused)
    mine = e.collapse(fork[2][0], fork[7][0], head=fork_head)
    assert set(mine.covers) & set(on_main.covers)
    shown = text(e.render(head=fork_head))
    assert f'expand_layer(\\"{layer_handle(mine)}\\")' in shown and "main 3-8" not in shown
    compacted = e.compact(head=fork_head)
    assert compacted.active
    # main still shows its own layer, and can still collapse around it
    assert "main 3-8" in text(e.render())
    assert e.collapse(main[9][0], main[11][0]).active
    # a partial overlap on one branch is still refused
    with pytest.raises(LayerConflict):
        g.add_layer("collapse", [n for r in main[7:10] for n in r], said("main 7-9"))


def test_a_fork_sees_an_ancestor_layer_it_holds_whole(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    main, _, fork_head = forked(g)
    g.add_layer("collapse", [n for r in main[1:4] for n in r], said("shared 1-3"))
    e = engine(g, tmp_path)
    assert "shared 1-3" in text(e.render(head=fork_head)) and "shared 1-3" in text(e.render())


# -- refinement ---------------------------------------------------------------------------


def test_a_refinement_shows_inside_the_coarse_layer_and_rolls_back_to_it(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    session(g, 12)
    r = round_ids(g)
    e = engine(g, tmp_path)
    g.add_layer("compact", [n for x in r[1:10] for n in x], [{"role": "user", "content": "COARSE"}])
    coarse = e.render()
    assert "COARSE" in text(coarse) and "step 5:" not in text(coarse)
    fine = g.add_layer(
        "collapse", [n for x in r[4:7] for n in x], [{"role": "user", "content": "FINE"}]
    )
    assert fine.builds_on == ()
    refined = e.render()
    shown = [m["content"] for m in refined.messages]
    assert shown.count("COARSE") == 1 and shown.count("FINE") == 1
    assert shown.index("COARSE") < shown.index("FINE")
    assert "step 5:" not in text(refined) and tool_pair_problems(refined.messages) == []
    e.rollback(fine.id)
    assert e.render().messages == coarse.messages


# -- property ---------------------------------------------------------------------------


@dataclass
class World:
    g: ConversationGraph
    tags: dict[str, str] = field(default_factory=dict)
    """Each layer's replacement text, by layer id."""
    rounds: int = 0


def heads(w: World) -> dict[str, str]:
    return {name: head for name, head in w.g.branches_by_name().items() if head is not None}


def applies(info: LayerInfo, walk: set[str]) -> bool:
    return info.active and set(info.covers) <= walk


def built_on(info: LayerInfo, layers: list[LayerInfo]) -> bool:
    """Hidden by a newer layer that holds all it covers."""
    return any(o.seq > info.seq and set(info.covers) <= set(o.covers) for o in layers)


def crosses(a: LayerInfo, b: LayerInfo) -> bool:
    shared = set(a.covers) & set(b.covers)
    return bool(shared) and shared not in (set(a.covers), set(b.covers))


def winners(layers: list[LayerInfo]) -> list[LayerInfo]:
    """Of layers a walk holds whole (oldest first), those that apply: one crossing an older
    one that applies (a fork's layer over nodes its parent's layer holds too) does not."""
    kept: list[LayerInfo] = []
    for info in layers:
        if not any(crosses(info, older) for older in kept):
            kept.append(info)
    return kept


def check(w: World, e: ContextEngine) -> None:
    g = w.g
    for head in heads(w).values():
        walk = {n for r in round_ids(g, head) for n in r}
        layers = winners([i for i in g.layers() if applies(i, walk)])
        for a in layers:  # on one walk, the layers that apply nest or are apart
            for b in layers:
                shared = set(a.covers) & set(b.covers)
                assert not shared or shared in (set(a.covers), set(b.covers))
        shown = [m.get("content") for m in e.preview(head=head).messages]
        for info in layers:
            hidden = built_on(info, layers)
            finer = [
                o
                for o in layers
                if o.seq > info.seq and set(o.covers) < set(info.covers) and not built_on(o, layers)
            ]
            left = set(info.covers) - {n for o in finer for n in o.covers}
            expected = 0 if hidden or not left else 1
            assert shown.count(w.tags[info.id]) == expected, info.id
        covered = {n for i in layers for n in i.covers}
        rounds = round_ids(g, head)
        latest = rounds[-1][0] if rounds else None  # the request: always shown
        for node_id in walk:
            node = g.get(node_id)
            if node.role == "user" and node.kind == "dialogue":
                visible = node.payload.content in shown
                assert visible == (node_id not in covered or node_id == latest), node_id


ops = st.lists(
    st.tuples(
        st.sampled_from(["append", "branch", "checkout", "layer", "layer", "rollback"]),
        st.integers(0, 10_000),
        st.integers(0, 10_000),
    ),
    min_size=8,
    max_size=30,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_layers_over_random_forks_refinements_and_rollbacks(steps: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        g = ConversationGraph(MemoryStore(), "s1")
        w = World(g)
        session(g, 6)
        w.rounds = 6
        e = ContextEngine(
            g, Policy(), budget=1_000_000, clock=clock, tiers=[], state_dir=Path(folder)
        )
        before: dict[str, tuple[str, int, list[Any]]] = {}
        for kind, a, b in steps:
            rs = round_ids(g, g.head)
            if kind == "append":
                session(g, 1 + a % 3, first=w.rounds)
                w.rounds += 3
            elif kind == "branch" and rs:
                name = f"b{len(heads(w))}"
                g.create_branch(name, at=rs[a % len(rs)][1])
                g.checkout(name)
            elif kind == "checkout":
                names = sorted(heads(w))
                g.checkout(names[a % len(names)])
            elif kind == "layer" and rs:
                start = a % len(rs)
                end = start + 1 + b % (len(rs) - start)
                covers = [n for r in rs[start:end] for n in r]
                tag = f"SUMMARY-{len(w.tags)}"
                previous = e.preview(head=g.head).messages
                try:
                    info = g.add_layer("collapse", covers, [{"role": "user", "content": tag}])
                except LayerConflict:
                    event("a partly overlapping layer was refused")
                    continue
                refines = [o for o in g.layers() if o.active and set(covers) < set(o.covers)]
                if refines:
                    event("a refinement landed")
                if any(
                    set(covers) & set(o.covers)
                    for o in g.layers()
                    if o.id != info.id
                    and not set(o.covers) <= set(covers)
                    and not set(covers) <= set(o.covers)
                ):
                    event("a layer overlapping another branch's layer landed")
                w.tags[info.id] = tag
                before[info.id] = (g.head or "", g.last_seq, previous)
            elif kind == "rollback":
                active = [i for i in g.layers() if i.active]
                if not active:
                    continue
                chosen = active[a % len(active)]
                head, seq, previous = before[chosen.id]
                untouched = g.last_seq == seq and g.head == head  # nothing since it was made
                done = e.rollback(chosen.id)
                if untouched:
                    assert [i.id for i in done] == [chosen.id]
                    # rolling back the newest layer (a refinement or not) restores the prompt
                    event("a rollback restored the prompt before its layer")
                    assert e.preview(head=head).messages == previous
            check(w, e)


def test_a_fresh_engine_renders_a_refined_checkpointed_span_the_same(tmp_path: Path) -> None:
    # A span this long is checkpointed: a fresh engine stands placeholders in for its units,
    # and the refinement inside it must show over them exactly as over the built units.
    g = ConversationGraph.memory("s1")
    session(g, 300, words=2)
    r = round_ids(g)
    running = engine(g, tmp_path)
    g.add_layer("compact", [n for x in r[1:290] for n in x], said("COARSE"))
    running.render()
    assert running._frames[None].checkpoint is not None
    g.add_layer("collapse", [n for x in r[100:110] for n in x], said("FINE"))
    refined = running.render()
    shown = [m["content"] for m in refined.messages]
    assert shown.count("COARSE") == 1 and shown.count("FINE") == 1
    fresh = engine(g, tmp_path)
    assert fresh.render().messages == refined.messages
