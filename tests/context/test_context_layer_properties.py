"""Bounded property tests of layers and the engine's other promises.

(a) manual collapses in any order and nesting, rolled back in any order: a render depends
    only on which layers are active, so rolling everything back renders byte-identically;
(b) an unchanged segment is never summarized twice over a sequence of renders;
(c) every render fits (when its core can) after any sequence of tiers and operations;
(d) a restarted engine renders byte-identically with the same policy and clock;
(e) a preview render changes nothing stored.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _context_helpers import start, tool_round
from _layer_helpers import NOW, Counting, clock, encode
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from test_context_properties import COUNTER, INSERTED_TURN, Builder, Built, Plan, plans

from context import (
    ContextEngine,
    ContextError,
    ContextOverflowError,
    Policy,
    tool_pair_problems,
)
from graph import ConversationGraph, GraphError, MemoryStore

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@contextmanager
def state_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder) / ".openprogram"


def rounds(g: ConversationGraph, sizes: list[int], first: int = 0) -> list[list[str]]:
    """Rounds of a user message, an assistant calling Bash and its output of ``size``
    characters; every fifth is followed by a finished function. Node ids per unit."""
    units = []
    for offset, size in enumerate(sizes):
        i = first + offset
        user = g.append({"role": "user", "content": f"step {i}: check src/mod_{i}.py"}, at=NOW)
        assistant = tool_round(
            g,
            [("Bash", (f"line {i} of the output\n" * (size // 22 + 1))[:size])],
            prefix=f"c{i}",
            content=f"I decided to use approach_{i} for module_{i}.",
            at=NOW,
        )
        units.append([user.id, assistant.id])
        if i % 5 == 4:
            with g.function("research", input={"i": i}, expose="io") as fn:
                g.append({"role": "assistant", "content": f"looked at {i}"}, at=NOW)
                fn.output = f"module_{i} is fine"
            units.append([fn.id])
    return units


# -- (a) collapse and rollback in any order -----------------------------------------------

collapse_ops = st.lists(
    st.one_of(
        st.tuples(st.just("collapse"), st.integers(0, 40), st.integers(0, 40)),
        st.tuples(st.just("raw"), st.integers(0, 40), st.integers(0, 40)),
        st.tuples(st.just("rollback"), st.integers(0, 40), st.just(0)),
    ),
    min_size=1,
    max_size=14,
)


@settings(SETTINGS, max_examples=60)
@given(
    st.lists(st.integers(0, 900), min_size=4, max_size=16),
    collapse_ops,
    st.randoms(use_true_random=False),
)
def test_collapse_and_rollback_in_any_order_is_byte_identical(
    sizes: list[int], ops: list[tuple[str, int, int]], rng: Any
) -> None:
    with state_dir():
        g = ConversationGraph.memory("p1")
        start(g)
        units = rounds(g, sizes)
        e = ContextEngine(g, Policy(), budget=1_000_000, clock=clock)
        walk = [list(u.node_ids) for u in e.context()[0].units if u.kind in ("round", "call")]
        seen: dict[frozenset[str], str] = {}

        def check() -> None:
            rendered = e.render()
            assert tool_pair_problems(rendered.messages) == []
            assert rendered.actions == [] and rendered.records == []
            active = frozenset(i.id for i in g.layers(active=True))
            assert seen.setdefault(active, encode(rendered)) == encode(rendered)

        check()
        for kind, a, b in ops:
            if kind == "collapse":
                first = units[a % len(units)]
                last = units[b % len(units)]
                try:
                    e.collapse(rng.choice(first), rng.choice(last))
                except (ContextError, GraphError):
                    continue  # a range the graph refuses (layers must nest): skipped
            elif kind == "raw":
                # A layer straight in the graph over whole units; one that overlaps another
                # only in part is refused (layers nest), and that step is skipped.
                start_at, end_at = sorted((a % len(walk), b % len(walk)))
                covers = [n for unit in walk[start_at : end_at + 1] for n in unit]
                if rng.random() < 0.5:
                    covers = covers[rng.randrange(len(covers)) :]  # may split a round
                replacement = [{"role": "user", "content": f"[raw layer over {len(covers)}]"}]
                try:
                    g.add_layer("collapse", covers, replacement)
                except GraphError:
                    event("a partly overlapping layer was refused")
                    continue
            else:
                layers = g.layers(active=True)
                if not layers:
                    continue
                e.rollback(layers[a % len(layers)].id)
            check()
        for info in rng.sample(g.layers(), len(g.layers())):
            try:
                e.rollback(info.id)
            except ContextError:
                assert not g.layer(info.id).active  # rolled back with one it built on
            check()
        assert g.layers(active=True) == []
        assert encode(e.render()) == seen[frozenset()]
        event(f"layers made: {min(len(g.layers()), 4)}")
        event(f"nested: {any(i.builds_on for i in g.layers())}")
        event(f"raw layers applied: {any('[raw layer' in m for m in seen.values())}")


# -- (b) an unchanged segment is summarized once ------------------------------------------

session_ops = st.lists(
    st.one_of(
        st.tuples(st.just("turns"), st.lists(st.integers(0, 3_000), min_size=1, max_size=4)),
        st.tuples(st.just("rollback"), st.integers(0, 20)),
        st.tuples(st.just("again"), st.integers(0, 20)),
        st.tuples(st.just("render"), st.just(0)),
    ),
    min_size=2,
    max_size=12,
)


@settings(SETTINGS, max_examples=60)
@given(
    st.lists(st.integers(0, 3_000), min_size=8, max_size=24),
    session_ops,
    st.integers(1_500, 5_000),
    st.sampled_from(["claude-code", "progressive", "auto-compact"]),
)
@example(  # a compaction rolled back, then made again beside new rounds (it was asked twice)
    sizes=[0, 0, 0, 0, 0, 2464, 0, 0],
    ops=[("rollback", 0), ("turns", [0]), ("turns", [0])],
    budget=1500,
    preset="progressive",
)
def test_an_unchanged_segment_is_never_summarized_again(
    sizes: list[int], ops: list[tuple[str, Any]], budget: int, preset: str
) -> None:
    with state_dir():
        g = ConversationGraph.memory("p2")
        start(g)
        rounds(g, sizes)
        extra: dict[str, Any] = {}
        if preset == "auto-compact":
            extra["cascade"] = ("offload", "microcompact", "compact", "snip", "emergency")
            preset = "claude-code"
        summarizer = Counting()
        e = ContextEngine(g, Policy.named(preset, **extra), summarizer, budget, clock=clock)
        made = len(sizes)

        def check() -> None:
            assert e.render().fits
            # per kind: a compaction may cover the very rounds a collapse summarized
            calls = [(r.kind, tuple(r.node_ids)) for r in summarizer.requests]
            assert len(set(calls)) == len(calls), "a segment was summarized twice"
            # The budget never collapses again what a rolled-back collapse covered.
            collapses = [i for i in g.layers() if i.kind == "collapse"]
            for made in collapses:
                if made.layer.meta.get("reason") != "budget":
                    continue
                for gone in collapses:
                    if gone.rolled_back is not None and gone.rolled_back < made.seq:
                        assert set(made.covers).isdisjoint(gone.covers)

        check()
        for kind, value in ops:
            if kind == "turns":
                rounds(g, value, first=made)
                made += len(value)
            elif kind == "rollback":
                layers = g.layers(active=True)
                if layers:
                    e.rollback(layers[value % len(layers)].id)
            elif kind == "again":
                # By hand, a rolled-back collapse over the same nodes reuses its summary.
                gone = [i for i in g.layers(active=False) if i.kind == "collapse"]
                if gone:
                    info = gone[value % len(gone)]
                    calls = len(summarizer.calls)
                    try:
                        e.collapse(info.covers[0], info.covers[-1])
                    except ContextError:
                        continue  # no longer shown as those rounds (snipped, compacted)
                    if g.layers()[-1].covers == info.covers:
                        assert len(summarizer.calls) == calls
            check()
        event(f"summaries: {min(len(summarizer.calls), 3)}")
        event(f"rolled back: {bool(g.layers(active=False))}")


# -- (c) every render fits --------------------------------------------------------------

engine_ops = st.lists(
    st.one_of(
        st.tuples(st.just("render"), st.just(0)),
        st.tuples(st.just("turn"), st.integers(0, 8_000)),
        st.tuples(st.just("collapse"), st.integers(0, 60)),
        st.tuples(st.just("compact"), st.just(0)),
        st.tuples(st.just("rollback"), st.integers(0, 20)),
        st.tuples(st.just("recover"), st.just(0)),
        st.tuples(st.just("success"), st.just(0)),
        st.tuples(st.just("preview"), st.just(0)),
    ),
    max_size=10,
)


def core_fits(built: Built, budget: int) -> tuple[bool, int]:
    """Whether the render's core (system, tasks, newest round, margins) fits; see
    ``test_context_properties``. Also the slack an integrity-inserted turn may need."""
    core = COUNTER.count_messages([built.system, *built.tasks, *built.newest])
    tool_calls = sum(1 for m in built.newest if m["role"] == "tool")
    return core + 150 + 60 * tool_calls <= budget, COUNTER.count_message(INSERTED_TURN)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(plans, engine_ops, st.sampled_from(["claude-code", "progressive"]))
def test_every_render_fits_after_any_operations(
    plan: Plan, ops: list[tuple[str, int]], preset: str
) -> None:
    with state_dir(), Builder(plan).build() as built:
        g = built.g
        frame = built.frames[-1] if built.frames else None
        pol = Policy.named(preset, plan.model)
        e = ContextEngine(g, pol, budget=plan.budget, clock=clock)
        fits, slack = core_fits(built, plan.budget)
        ids = [n.id for n in g.nodes() if n.kind != "tool"]
        users: list[dict[str, Any]] = []

        def check(rendered: Any) -> None:
            assert tool_pair_problems(rendered.messages) == []
            assert not [a for a in rendered.actions if "broke tool pairing" in a.what]
            if fits:
                assert rendered.tokens <= plan.budget + slack, [a.what for a in rendered.actions]

        check(e.render(frame=frame))
        for kind, value in ops:
            if kind == "render":
                check(e.render(frame=frame))
            elif kind == "preview":
                check(e.preview(frame=frame))
            elif kind == "turn" and frame is None and not built.frames:
                message = {"role": "user", "content": "next " + "word " * (value // 5)}
                g.append(message)
                # Consecutive user messages are one unit: the newest is all of them.
                users = [*users, message]
                built.newest = users
                fits, slack = core_fits(built, plan.budget)
                check(e.render())
            elif kind == "collapse" and len(ids) > 2:
                try:
                    e.collapse(ids[value % len(ids)], ids[(value * 7) % len(ids)], frame=frame)
                except (ContextError, GraphError):
                    continue
            elif kind == "compact":
                try:
                    e.compact(frame=frame)
                except ContextError:
                    continue
            elif kind == "rollback":
                layers = g.layers(active=True)
                if layers:
                    e.rollback(layers[value % len(layers)].id)
            elif kind == "recover":
                try:
                    check(e.recover(ValueError("prompt is too long"), frame=frame))
                except ContextOverflowError:
                    continue
            elif kind == "success":
                e.note_success()
        check(e.render(frame=frame))
        event(f"fits: {fits}")
        event(f"layers: {min(len(g.layers()), 3)}")


# -- (d) a restarted engine renders the same ----------------------------------------------


@SETTINGS
@given(plans, st.lists(st.integers(0, 6_000), max_size=6))
def test_a_restarted_engine_renders_byte_identically(plan: Plan, turns: list[int]) -> None:
    with state_dir(), Builder(plan).build() as built:
        g = built.g
        pol = Policy(model=plan.model, microcompact_first=3, microcompact_every=2)
        e = ContextEngine(g, pol, budget=plan.budget, clock=clock)
        e.render()
        if not built.frames:
            for i, size in enumerate(turns):
                tool_round(g, [("Bash", "x" * size)], prefix=f"t{i}")
                e.render()
        last = e.render()
        restarted = ContextEngine(g, pol, budget=plan.budget, clock=clock)
        rendered = restarted.render()
        assert encode(rendered) == encode(last)
        assert [r for r in rendered.records if r.tier != "emergency"] == []


# -- (e) a preview changes nothing stored ---------------------------------------------------


@SETTINGS
@given(plans, st.integers(0, 3))
def test_a_preview_changes_nothing_stored(plan: Plan, renders: int) -> None:
    with (
        state_dir() as folder,
        Builder(plan).build() as built,
    ):
        g = ConversationGraph(MemoryStore(), "p5")
        built.g.clone(g.store, "p5")
        g.refresh()
        pol = Policy(model=plan.model, offload_chars=4_000)
        e = ContextEngine(g, pol, budget=plan.budget, clock=clock)
        for _ in range(renders):
            e.render()

        def stored() -> Any:
            files = (
                sorted((str(p), p.read_bytes()) for p in folder.rglob("*") if p.is_file())
                if folder.exists()
                else []
            )
            return (
                files,
                g.layers(),
                g.last_seq,
                e.records(),
                g.store.get_values("p5", "context.state"),
                g.store.get_values("p5", f"context.tokens.{e.counter.encoding_name}"),
            )

        before = stored()
        preview = e.preview()
        assert preview.preview
        assert stored() == before
        real = e.render()
        assert encode(real) == encode(preview)
