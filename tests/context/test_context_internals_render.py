"""The render's layout, seen from inside: an engine that extends its walk renders exactly
what one that walks in full renders, and a fresh engine starts its layout from the
persisted checkpoint, walking in full whenever the graph changed under it (either way it
renders what a full walk renders)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _context_helpers import policy
from _layer_helpers import clock, encode, session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context import (
    ContextEngine,
    Policy,
    Rendered,
)

# internal: the layout is reset or kept from restoring; the checkpoint's trust rule
from context._render import _checkpoint
from context._render._layout import Layout
from graph import ConversationGraph

BUDGET = 3_000


# -- an incremental walk renders what a full walk renders ----------------------------------


class FullWalkEngine(ContextEngine):
    """The reference: forgets its layouts before every render."""

    def render(
        self, head: str | None = None, frame: str | None = None, *, preview: bool = False
    ) -> Rendered:
        for state in self._frames.values():
            state.layout = Layout()
            state.scratch.clear()
        return super().render(head=head, frame=frame, preview=preview)


def _call(call_id: str, name: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


operations = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.integers(1, 400)),
        st.tuples(st.just("assistant"), st.integers(0, 3)),
        st.tuples(st.just("result"), st.integers(0, 12_000)),
        st.tuples(st.just("enter"), st.sampled_from(["io", "full", "llm", "hidden"])),
        st.tuples(st.just("exit"), st.integers(0, 1)),
        st.tuples(st.just("fork"), st.integers(0, 1000)),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations, st.sampled_from([300, 1_500, 6_000]))
def test_incremental_equals_full_walk(ops: list[tuple[str, Any]], budget: int) -> None:
    with tempfile.TemporaryDirectory():
        g = ConversationGraph.memory("inc")
        g.append({"role": "system", "content": "system prompt"})
        g.append({"role": "user", "content": "the task"})
        # No layer-making tier: both engines render one graph, and a layer one of them made
        # would show in the other's renders (layers are graph facts, tested elsewhere).
        cascade = ("offload", "budget_reduction", "microcompact", "snip", "emergency")
        policy = Policy(microcompact_first=3, microcompact_every=2, cascade=cascade)
        live = ContextEngine(g, policy, budget=budget)
        reference = FullWalkEngine(g, policy, budget=budget)
        frames: list[Any] = []
        pending: list[str] = []
        for counter, (kind, value) in enumerate(ops, start=1):
            if kind == "user":
                g.append({"role": "user", "content": f"u{counter} " + "w " * value})
            elif kind == "assistant":
                calls = [
                    _call(f"c{counter}_{i}", ["Bash", "Read", "deploy"][i % 3])
                    for i in range(value)
                ]
                message: dict[str, Any] = {"role": "assistant", "content": f"a{counter}"}
                if calls:
                    message["tool_calls"] = calls
                g.append(message)
                pending += [c["id"] for c in calls]
            elif kind == "result" and pending:
                g.append({"role": "tool", "tool_call_id": pending.pop(0), "content": "x" * value})
            elif kind == "enter" and len(frames) < 2:
                context = g.function(f"f{counter}", input={"n": counter}, expose=value)
                context.__enter__()
                frames.append(context)
            elif kind == "exit" and frames:
                frames.pop().__exit__(None, None, None)
            elif kind == "fork" and not frames:
                chain = [n.id for n in g.nodes() if n.kind != "tool" and g.caller(n.id) is None]
                g.fork(chain[value % len(chain)])
            frame = g.frame
            got = live.render(frame=frame) if frame else live.render()
            want = reference.render(frame=frame) if frame else reference.render()
            assert json.dumps(got.messages) == json.dumps(want.messages)
            assert got.tokens == want.tokens
        while frames:
            frames.pop().__exit__(None, None, None)
        assert json.dumps(live.render().messages) == json.dumps(reference.render().messages)


def test_a_long_session_walks_once(tmp_path: Path) -> None:
    g = ConversationGraph.memory("long")
    g.append({"role": "user", "content": "task"})
    engine = ContextEngine(g, Policy(), budget=2_000)
    for i in range(300):
        g.append(
            {"role": "assistant", "content": f"step {i}", "tool_calls": [_call(f"c{i}", "Bash")]}
        )
        engine.render()
        g.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"out {i} " * 50})
        engine.render()
    assert engine._frames[None].layout.rebuilds == 1
    assert engine.last is not None and engine.last.fits


# -- the checkpoint ---------------------------------------------------------------------


@pytest.fixture
def small_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkpoint spans of a few units (the default only trusts long ones)."""
    monkeypatch.setattr(_checkpoint, "MIN_HIDDEN", 2)


def tuned(tmp_path: Path) -> Policy:
    return policy(tmp_path, microcompact_first=10, microcompact_every=5)


@pytest.fixture
def graph(tmp_path: Path, small_spans: None) -> Iterator[ConversationGraph]:
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
