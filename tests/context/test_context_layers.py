"""Layers and the manual operations: collapse, rollback, expand, layers(), reading as of a
seq; a rollback the budget forced; summaries computed once; fail-open summarizers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _context_helpers import policy, start
from _layer_helpers import BROKEN, Broken, Counting, clock, encode, session

from context import (
    ContextEngine,
    ContextError,
    HeuristicSummarizer,
    UnknownLayer,
    tool_pair_problems,
)
from graph import ConversationGraph, MemoryStore, layer_handle

AMPLE = 1_000_000


def engine(
    g: ConversationGraph, tmp_path: Path, budget: int = AMPLE, **kwargs: object
) -> ContextEngine:
    return ContextEngine(g, policy(tmp_path), budget=budget, clock=clock, **kwargs)  # type: ignore[arg-type]


# -- collapse and rollback ------------------------------------------------------------


def test_collapse_then_rollback_renders_exactly_what_was_rendered_before(
    store_url: str, tmp_path: Path
) -> None:
    g = ConversationGraph.open(store_url, session="s1")
    try:
        ids = session(g, 10)
        e = engine(g, tmp_path)
        before = e.render()
        info = e.collapse(ids[2][0], ids[6][1])
        assert info.kind == "collapse" and info.active
        assert len(info.covers) == 5 * 3  # five rounds of user, assistant and tool nodes
        collapsed = e.render()
        assert collapsed.tokens < before.tokens
        assert len(collapsed.messages) == len(before.messages) - 15 + 1
        [summary] = [m for m in collapsed.messages if "[Collapsed:" in str(m["content"])]
        assert f'expand_layer("{layer_handle(info)}")' in summary["content"]
        assert "### User Intent" in summary["content"]

        done = e.rollback(info.id, reason="look again")
        assert [i.id for i in done] == [info.id]
        assert not done[0].active and done[0].reason == "look again"
        after = e.render()
        assert encode(after) == encode(before)
        # A fresh engine (another process) renders the same after the rollback.
        assert encode(engine(g, tmp_path).render()) == encode(before)
        tiers = [r.tier for r in e.records()]
        assert tiers == ["collapse", "rollback"]
        rollback = e.records()[-1]
        assert rollback.details == {
            "layers": [info.id],
            "layer": info.id,
            "reason": "look again",
            "kind": "collapse",
            "again": [],  # the restored rounds fit whole: the next render makes no layer again
        }
    finally:
        g.close()


def test_a_collapse_over_an_earlier_collapse_builds_on_it(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    ids = session(g, 12)
    e = engine(g, tmp_path)
    before = e.render()
    inner = e.collapse(ids[3][0], ids[5][1])
    middle = e.render()
    # The range names nodes outside and inside the inner layer: the layer unit is taken whole.
    outer = e.collapse(ids[1][0], ids[7][1])
    assert outer.builds_on == (inner.id,)
    assert set(inner.covers) < set(outer.covers)
    assert len(outer.covers) == 7 * 3
    nested = e.render()
    assert nested.tokens < middle.tokens < before.tokens
    assert not any(
        f'expand_layer("{layer_handle(inner)}")' in str(m["content"]) for m in nested.messages
    )

    # Rolling back the inner layer rolls back the outer one too (it was built on it).
    done = e.rollback(inner.id)
    assert [i.id for i in done] == [outer.id, inner.id]
    assert [i.active for i in e.layers()] == [False, False]
    assert encode(e.render()) == encode(before)
    with pytest.raises(ContextError, match="already rolled back"):
        e.rollback(outer.id)


def test_rolling_back_the_outer_layer_shows_the_inner_one_again(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    ids = session(g, 12)
    e = engine(g, tmp_path)
    inner = e.collapse(ids[3][0], ids[5][1])
    middle = e.render()
    outer = e.collapse(ids[1][0], ids[7][1])
    assert [i.id for i in e.rollback(outer.id)] == [outer.id]
    assert e.layer(inner.id).active
    assert encode(e.render()) == encode(middle)


def test_rollback_twice_raises_a_context_error(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    ids = session(g, 8)
    e = engine(g, tmp_path)
    info = e.collapse(ids[0][0], ids[4][1])
    e.rollback(info.id)
    with pytest.raises(ContextError, match=f"layer {info.id} was already rolled back"):
        e.rollback(info.id)
    assert [r.tier for r in e.records()] == ["collapse", "rollback"]


def test_layers_lists_active_and_rolled_back_layers(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    ids = session(g, 14)
    e = engine(g, tmp_path)
    assert e.layers() == []
    first = e.collapse(ids[0][0], ids[4][1])
    second = e.collapse(ids[6][0], ids[9][1])
    e.rollback(first.id)
    assert [i.id for i in e.layers()] == [first.id, second.id]
    assert [i.id for i in e.layers(active=True)] == [second.id]
    assert [i.id for i in e.layers(active=False)] == [first.id]
    assert e.layer(first.id).rolled_back is not None
    assert e.layers() == g.layers()


# -- expand ---------------------------------------------------------------------------


def test_expand_returns_the_covered_original_messages(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    ids = session(g, 10)
    original = g.to_openai()
    e = engine(g, tmp_path)
    info = e.collapse(ids[2][0], ids[5][1])
    # Rounds 2..5: three messages each, after the system prompt and the task.
    assert e.expand(info.id) == original[2 + 3 * 2 : 2 + 3 * 6]
    assert e.expand(info.id) == e.expand(info.id)  # reading changes nothing
    e.rollback(info.id)
    assert e.expand(info.id) == original[2 + 3 * 2 : 2 + 3 * 6]  # still readable


def test_expand_a_nested_layer_returns_every_covered_message(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    ids = session(g, 10)
    original = g.to_openai()
    e = engine(g, tmp_path)
    e.collapse(ids[3][0], ids[4][1])
    outer = e.collapse(ids[2][0], ids[6][1])
    assert e.expand(outer.id) == original[2 + 3 * 2 : 2 + 3 * 7]


def test_expand_a_finished_function_returns_its_internals(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g)
    with g.function("research", input={"q": "parser"}, expose="io") as fn:
        g.append({"role": "user", "content": "find where parse() fails"})
        g.append({"role": "assistant", "content": "it fails on empty lines"})
        with g.function("lint", input="src/parse.py", expose="io") as inner:
            g.append({"role": "assistant", "content": "ruff: 3 errors in parse.py"})
            inner.output = "3 errors"
        fn.output = "parse() fails on empty lines"
    g.append({"role": "user", "content": "fix it then"})
    e = engine(g, tmp_path)
    rendered = e.render()
    shown = json.dumps(rendered.messages)
    assert "find where parse() fails" not in shown  # io: only the call and its output

    own = e.expand(fn.id)
    assert [m["role"] for m in own] == ["user", "assistant", "assistant", "tool"]
    assert own[0]["content"] == "find where parse() fails"
    assert own[2]["tool_calls"][0]["function"]["name"] == "lint"
    assert own[3]["content"] == "3 errors"
    assert "ruff: 3 errors" not in json.dumps(own)

    deep = e.expand(fn.id, depth=2)
    assert [m["content"] for m in deep if m["role"] != "tool"][:3] == [
        "find where parse() fails",
        "it fails on empty lines",
        "ruff: 3 errors in parse.py",
    ]
    assert e.expand(inner.id) == [{"role": "assistant", "content": "ruff: 3 errors in parse.py"}]


def test_expand_a_layer_over_a_finished_function(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    ids = session(g, 6)
    with g.function("research", input=1, expose="io") as fn:
        g.append({"role": "assistant", "content": "inside"})
        fn.output = "found"
    session(g, 4, first=6)
    e = engine(g, tmp_path)
    original = e.render().messages  # the function shows as its call and output (io)
    info = e.collapse(ids[4][0], fn.id)
    assert fn.id in info.covers
    expanded = e.expand(info.id)
    assert expanded == original[2 + 3 * 4 : 2 + 3 * 6 + 2]
    assert expanded[-1] == {
        "role": "tool",
        "tool_call_id": expanded[-2]["tool_calls"][0]["id"],
        "content": "found",
    }


# -- unknown ids ----------------------------------------------------------------------


def test_unknown_ids_and_another_sessions_layer_raise_unknown_layer(tmp_path: Path) -> None:
    store = MemoryStore()
    g = ConversationGraph(store, "s1")
    ids = session(g, 8)
    other = ConversationGraph(store, "s2")
    other_ids = session(other, 8)
    theirs = engine(other, tmp_path).collapse(other_ids[0][0], other_ids[4][1])
    e = engine(g, tmp_path)
    for bad in ("no-such-layer", theirs.id):
        for operation in (e.rollback, e.expand, e.layer):
            with pytest.raises(UnknownLayer, match=repr(bad)) as caught:
                operation(bad)
            assert isinstance(caught.value, ContextError)
            assert "session 's1'" in str(caught.value)
    with pytest.raises(UnknownLayer, match="not in the rendered conversation"):
        e.collapse(other_ids[0][0], ids[3][1])
    assert g.layers() == [] and other.layer(theirs.id).active


# -- refusals -------------------------------------------------------------------------


def test_manual_collapse_refuses_the_pinned_prompt_and_task(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    ids = session(g, 8)
    system, task = g.nodes()[0].id, g.nodes()[1].id
    e = engine(g, tmp_path)
    seq = g.last_seq
    for first in (system, task):
        with pytest.raises(ContextError, match="cannot collapse the system prompt or the task"):
            e.collapse(first, ids[4][1])
    with pytest.raises(ContextError, match="pick rounds or finished functions"):
        e.collapse(ids[4][1], task)  # either order
    assert g.last_seq == seq and g.layers() == [] and e.records() == []


def test_manual_collapse_refuses_a_running_function(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    ids = session(g, 8)
    with g.function("worker", input=1) as fn:
        inner = g.append({"role": "user", "content": "work on it"})
        g.append({"role": "assistant", "content": "working"})
        e = engine(g, tmp_path)
        seq = g.last_seq
        for frame in (None, fn.id):
            with pytest.raises(ContextError, match="cannot collapse a running function"):
                e.collapse(ids[2][0], inner.id, frame=frame)
        assert g.last_seq == seq and g.layers() == []
        # Finished rounds before the function can still be collapsed from inside it.
        info = e.collapse(ids[0][0], ids[4][1], frame=fn.id)
        assert info.active
        shown = [str(m["content"]) for m in e.render(frame=fn.id).messages]
        assert "work on it" in shown
        assert any(f'expand_layer("{layer_handle(info)}")' in text for text in shown)


# -- reading as of a seq ----------------------------------------------------------------


def test_a_render_as_of_an_earlier_seq_shows_the_layers_active_then(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    ids = session(g, 10)
    e = engine(g, tmp_path)
    before = e.render()
    plain = g.last_seq
    info = e.collapse(ids[1][0], ids[5][1])
    collapsed = e.render()
    made = g.last_seq
    e.rollback(info.id)
    assert encode(e.render()) == encode(before)

    assert g.at(plain).layers() == []
    assert g.at(made).layer(info.id).active
    assert not g.layer(info.id).active
    then = ContextEngine(g.at(made), policy(tmp_path), budget=1_000_000, clock=clock).render()
    assert encode(then) == encode(collapsed)
    earlier = ContextEngine(g.at(plain), policy(tmp_path), budget=1_000_000, clock=clock)
    assert encode(earlier.render()) == encode(before)
    assert earlier.layers() == []


# -- a rollback the budget forced -----------------------------------------------------


def test_a_rolled_back_budget_collapse_is_not_collapsed_again(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    ids = session(g, 24)
    full = engine(g, tmp_path / "probe").render().tokens
    budget = int(full * 0.8)
    summarizer = Counting()
    e = engine(g, tmp_path, budget=budget, summarizer=summarizer)
    first = e.render()
    assert first.fits
    collapses = [r for r in first.records if r.tier == "collapse"]
    assert collapses and all(r.error is None for r in collapses)
    assert [a.tier for a in first.actions] == ["collapse"] * len(collapses)
    layer = e.layer(collapses[0].details["layer"])
    assert layer.covers[0] == ids[0][0]
    calls = len(summarizer.calls)

    e.rollback(layer.id)
    # More turns: the prompt is over budget again; the rolled-back segment stays as is.
    session(g, 6, first=24)
    after = e.render()
    assert after.fits
    assert tool_pair_problems(after.messages) == []
    assert after.actions, "other tiers had to act"
    new = [r for r in after.records if r.tier == "collapse"]
    for record in new:
        assert record.error is None
        info = e.layer(record.details["layer"])
        assert not set(info.covers) & set(layer.covers)
        assert info.id != layer.id
    assert all(set(layer.covers).isdisjoint(c) for c in summarizer.calls[calls:])
    for info in e.layers(active=True):
        assert set(layer.covers).isdisjoint(info.covers)
    # Snip may drop the oldest of those rounds (it keeps no summary), never summarize them.
    assert {a.tier for a in after.actions} <= {"collapse", "compact", "snip", "microcompact"}
    # And it stays so: later renders keep it verbatim, with no new records.
    again = e.render()
    assert encode(again) == encode(after)
    assert again.records == []
    assert [r.tier for r in e.records()].count("rollback") == 1


# -- summaries computed once -----------------------------------------------------------


def test_a_segment_is_summarized_once_over_many_renders(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    session(g, 20)
    full = engine(g, tmp_path / "probe").render().tokens
    summarizer = Counting()
    e = engine(g, tmp_path, budget=int(full * 0.8), summarizer=summarizer)
    e.render()
    assert summarizer.calls
    assert len(set(summarizer.calls)) == len(summarizer.calls)
    for turn in range(20):
        session(g, 1, first=20 + turn)
        assert e.render().fits
    assert len(set(summarizer.calls)) == len(summarizer.calls), "a segment was summarized twice"
    # A restarted engine does not summarize the stored segments again either.
    calls = len(summarizer.calls)
    engine(g, tmp_path, budget=int(full * 0.8), summarizer=summarizer).render()
    assert len(summarizer.calls) == calls


def test_a_rolled_back_segment_collapsed_again_by_hand_reuses_its_summary(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    ids = session(g, 10)
    summarizer = Counting()
    e = engine(g, tmp_path, summarizer=summarizer)
    info = e.collapse(ids[1][0], ids[6][1])
    collapsed = e.render()
    assert len(summarizer.calls) == 1
    e.rollback(info.id)
    again = e.collapse(ids[1][0], ids[6][1])
    assert len(summarizer.calls) == 1, "the stored summary was not reused"
    assert again.id != info.id and again.covers == info.covers
    assert again.layer.meta["summary"] == info.layer.meta["summary"]
    rendered = e.render()
    again_handle, first_handle = layer_handle(again), layer_handle(info)
    assert again_handle != first_handle  # a layer made again gets a handle of its own
    assert json.dumps(rendered.messages).replace(again_handle, first_handle) == json.dumps(
        collapsed.messages
    )


def test_the_heuristic_summary_is_reused_too(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    ids = session(g, 10)
    calls: list[object] = []

    class Spy(HeuristicSummarizer):
        def summarize(self, request):  # type: ignore[no-untyped-def]
            calls.append(request)
            return super().summarize(request)

    e = engine(g, tmp_path, summarizer=Spy())
    info = e.collapse(ids[1][0], ids[6][1])
    e.rollback(info.id)
    e.collapse(ids[1][0], ids[6][1])
    assert len(calls) == 1


# -- fail-open summarizers --------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(BROKEN))
@pytest.mark.parametrize("tier", ["collapse", "compact"])
def test_a_broken_summarizer_fails_open(tmp_path: Path, kind: str, tier: str) -> None:
    g = ConversationGraph.memory("s1")
    session(g, 30)
    summarizer = Broken(kind, BROKEN[kind])
    # the one summarizing tier under test, then the cheaper ones it falls back to
    cascade = ("offload", "budget_reduction", "microcompact", tier, "snip", "emergency")
    pol = policy(tmp_path, cascade=cascade)
    e = ContextEngine(g, pol, summarizer=summarizer, budget=3_000, clock=clock)
    rendered = e.render()
    assert rendered.fits
    assert tool_pair_problems(rendered.messages) == []
    assert summarizer.calls == 1
    [failed] = [r for r in rendered.records if r.tier == tier]
    assert failed.error
    assert failed.tokens_before == failed.tokens_after
    if kind == "raising":
        assert "summarizer backend is down" in failed.error
    elif kind == "empty":
        assert failed.error == "summarizer returned an empty summary"
    else:
        assert "not a SummaryResult" in failed.error
    assert "snip" in [a.tier for a in rendered.actions]
    assert g.layers() == []
    # The failed segment is not asked about again by the budget.
    again = e.render()
    assert encode(again) == encode(rendered)
    assert summarizer.calls == 1 and again.records == []


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_manual_compact_with_a_broken_summarizer_raises_and_adds_no_layer(
    tmp_path: Path, kind: str
) -> None:
    g = ConversationGraph.memory("s1")
    session(g, 12)
    e = engine(g, tmp_path, summarizer=Broken(kind, BROKEN[kind]))
    before = e.render()
    seq, layers = g.last_seq, len(g.layers())
    with pytest.raises(ContextError, match="compaction failed: summarizer") as caught:
        e.compact(focus="the parser")
    if kind == "raising":
        assert "summarizer backend is down" in str(caught.value)
    assert g.last_seq == seq and len(g.layers()) == layers
    [record] = [r for r in e.records() if r.tier == "compact"]
    assert record.error and record.error in str(caught.value)
    assert encode(e.render()) == encode(before)
    with pytest.raises(ContextError, match="collapse failed: summarizer"):
        e.collapse(g.nodes()[2].id, g.nodes()[10].id)
    assert g.last_seq == seq and len(g.layers()) == layers


def test_a_good_scripted_summarizer_makes_the_layer(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    session(g, 30)
    summarizer = Counting()
    e = ContextEngine(g, policy(tmp_path), summarizer=summarizer, budget=3_000, clock=clock)
    rendered = e.render()
    assert rendered.fits
    assert tool_pair_problems(rendered.messages) == []
    collapses = [r for r in rendered.records if r.tier == "collapse"]
    assert collapses and all(r.error is None for r in collapses)
    for record in collapses:
        assert record.anchors is not None
        assert record.anchors["user_intent"] == ["fix the parser"]
        assert record.details["summarizer"]["name"] == "counting"
        assert record.summary and "## Summary\nsummary number" in record.summary
