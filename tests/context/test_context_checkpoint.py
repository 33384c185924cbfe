"""A fresh engine starts its layout from the persisted checkpoint, and walks in full
whenever the graph changed under it: either way it renders what a full walk renders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _context_helpers import policy
from _layer_helpers import clock, encode, session

from context import (
    ContextEngine,
    Policy,
    Rendered,
)

# internal: the checkpoint's trust rule; the layout's restore is patched to fail
from context._render import _checkpoint
from context._render._layout import Layout
from graph import ConversationGraph

BUDGET = 3_000


@pytest.fixture(autouse=True)
def small_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkpoint spans of a few units (the default only trusts long ones)."""
    monkeypatch.setattr(_checkpoint, "MIN_HIDDEN", 2)


def tuned(tmp_path: Path) -> Policy:
    return policy(tmp_path, microcompact_first=10, microcompact_every=5)


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[ConversationGraph]:
    g = ConversationGraph.open(tmp_path / "op.db", session="s1")
    try:
        yield g
    finally:
        g.close()


def engine(g: ConversationGraph, pol: Policy) -> ContextEngine:
    return ContextEngine(g, pol, budget=BUDGET, clock=clock)


def lived(g: ConversationGraph, pol: Policy, rounds: int = 45) -> ContextEngine:
    """An engine that rendered every round of a session long enough to compact."""
    session(g, 2)
    e = engine(g, pol)
    for i in range(2, rounds):
        session(g, 1, first=i)
        e.render()
    return e


def restored(e: ContextEngine) -> bool:
    return e._frames[None].layout.hidden is not None


def walked_in_full(
    g: ConversationGraph, pol: Policy, monkeypatch: pytest.MonkeyPatch, head: str | None = None
) -> str:
    """What a fresh engine that never trusts a checkpoint previews."""
    with monkeypatch.context() as patch:
        patch.setattr(Layout, "_restore", lambda *args: False)
        return encode(engine(g, pol).preview(head=head))


def saved(e: ContextEngine) -> Any:
    checkpoint = e._frames[None].checkpoint
    assert checkpoint is not None
    return checkpoint


def test_a_fresh_engine_starts_from_the_checkpoint_and_renders_the_same(
    graph: ConversationGraph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pol = tuned(tmp_path)
    running = lived(graph, pol)
    last: Rendered = running.render()
    assert saved(running).units[1] - saved(running).units[0] >= 2
    fresh = engine(graph, pol)
    assert encode(fresh.render()) == encode(last)
    assert restored(fresh)
    assert encode(fresh.preview()) == walked_in_full(graph, pol, monkeypatch)
    for i in range(45, 60):  # and it goes on as the engine that kept running
        session(graph, 1, first=i)
        assert encode(fresh.render()) == encode(running.render())


def test_nodes_appended_by_another_process_after_the_span_are_walked(
    graph: ConversationGraph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pol = tuned(tmp_path)
    lived(graph, pol).render()
    other = ConversationGraph.open(tmp_path / "op.db", session="s1")
    try:
        head = session(other, 2, first=45)[-1][1]
    finally:
        other.close()
    graph.refresh()
    fresh = engine(graph, pol)
    assert encode(fresh.preview(head=head)) == walked_in_full(graph, pol, monkeypatch, head)
    assert restored(fresh)
    # from this graph's own head, the other process's nodes are another branch
    again = engine(graph, pol)
    assert encode(again.preview()) == walked_in_full(graph, pol, monkeypatch)
    assert not restored(again)


def test_a_rolled_back_layer_means_a_full_walk(
    graph: ConversationGraph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pol = tuned(tmp_path)
    running = lived(graph, pol)
    running.render()
    graph.rollback_layer(saved(running).layer)
    fresh = engine(graph, pol)
    assert encode(fresh.preview()) == walked_in_full(graph, pol, monkeypatch)
    assert not restored(fresh)
    # the engine that kept running walks in full too, and renders the same
    assert encode(running.preview()) == encode(fresh.preview())


@pytest.mark.parametrize("where", ["in the span", "after the span"])
def test_a_fork_means_a_full_walk(
    graph: ConversationGraph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    pol = tuned(tmp_path)
    running = lived(graph, pol)
    running.render()
    checkpoint = saved(running)
    layer = graph.layer(checkpoint.layer)
    at = layer.covers[len(layer.covers) // 2] if where == "in the span" else checkpoint.after
    if graph.get(at).kind == "tool":
        at = graph.state.requested_by[at]
    graph.fork(at)
    session(graph, 1, first=99)
    fresh = engine(graph, pol)
    assert encode(fresh.preview()) == walked_in_full(graph, pol, monkeypatch)
    assert not restored(fresh)


def test_another_branch_head_means_a_full_walk(
    graph: ConversationGraph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pol = tuned(tmp_path)
    running = lived(graph, pol)
    running.render()
    head = graph.head
    assert head is not None
    graph.fork(saved(running).before)
    session(graph, 1, first=99)
    fresh = engine(graph, pol)
    assert encode(fresh.preview(head=head)) == encode(running.preview(head=head))
    assert not restored(fresh)
    with monkeypatch.context() as patch:
        patch.setattr(Layout, "_restore", lambda *args: False)
        assert encode(engine(graph, pol).preview(head=head)) == encode(fresh.preview(head=head))


def test_a_truncated_graph_means_a_full_walk(
    graph: ConversationGraph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pol = tuned(tmp_path)
    running = lived(graph, pol)
    running.render()
    checkpoint = saved(running)
    state = graph.state
    assert _checkpoint.trusted(checkpoint, state, graph.default_head() or "")
    state.truncate(len(state.records) - 1)
    if state.last_seq < checkpoint.seq:
        assert not _checkpoint.trusted(checkpoint, state, graph.default_head() or "")


def test_a_damaged_checkpoint_is_not_trusted(graph: ConversationGraph, tmp_path: Path) -> None:
    pol = tuned(tmp_path)
    running = lived(graph, pol)
    running.render()
    checkpoint = saved(running)
    head = graph.default_head() or ""
    wrong = type(checkpoint)(**{**_fields(checkpoint), "record": "nope"})
    assert not _checkpoint.trusted(wrong, graph.state, head)
    wrong = type(checkpoint)(**{**_fields(checkpoint), "layer": "nope"})
    assert not _checkpoint.trusted(wrong, graph.state, head)
    wrong = type(checkpoint)(**{**_fields(checkpoint), "sizes": [("round", 1, 1)]})
    assert _checkpoint.placeholders(wrong, graph.layer(checkpoint.layer).covers) is None


def _fields(value: Any) -> dict[str, Any]:
    return {name: getattr(value, name) for name in value.__struct_fields__}
