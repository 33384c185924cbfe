"""A render that resumes the last one's passes sends what a render over the whole prompt
sends (issue 35): the same messages, tokens, sources and receipt, whatever happened since."""

from __future__ import annotations

import tempfile
from contextlib import suppress
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context import ContextError, ContextStorage, Rendered, sent_prompt
from openprogram import Session
from openprogram.testing import TestModel

operations = st.lists(
    st.one_of(
        st.tuples(st.just("ask"), st.integers(1, 300)),
        st.tuples(st.just("tools"), st.integers(1, 3)),
        st.tuples(st.just("big"), st.integers(1, 30)),
        st.tuples(st.just("pending"), st.integers(1, 2)),
        st.tuples(st.just("users"), st.integers(2, 3)),
        st.tuples(st.just("collapse"), st.integers(0, 1_000)),
        st.tuples(st.just("compact"), st.just(0)),
        st.tuples(st.just("rollback"), st.integers(0, 1_000)),
        st.tuples(st.just("budget"), st.sampled_from([900, 2_500, 40_000])),
        st.tuples(st.just("merge"), st.sampled_from(["on", "off"])),
        st.tuples(st.just("back"), st.integers(0, 1_000)),
    ),
    min_size=1,
    max_size=22,
)


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "Bash", "arguments": "{}"}}


def _apply(session: Session, kind: str, value: int, step: int) -> None:
    graph, engine = session.graph, session.engine
    if kind == "ask":
        graph.append({"role": "user", "content": f"q{step} " + "w " * value})
    elif kind == "users":
        for n in range(value):
            graph.append({"role": "user", "content": f"q{step}.{n}"})
    elif kind in ("tools", "pending"):
        ids = [f"c{(step + n) % 3}" for n in range(value)]  # ids come back: renamed
        if kind == "pending":  # never answered: an id of its own
            ids = [f"p{step}.{n}" for n in range(value)]
        graph.append({"role": "user", "content": f"run {step}"})
        graph.append({"role": "assistant", "content": None, "tool_calls": [_call(i) for i in ids]})
        if kind == "tools":
            for call_id in ids:
                graph.append({"role": "tool", "tool_call_id": call_id, "content": "o " * 400})
    elif kind == "big":  # offloaded or reduced (in units the tiers may skip otherwise)
        call_id = f"b{step}"
        graph.append({"role": "user", "content": f"read {step}"})
        graph.append({"role": "assistant", "content": None, "tool_calls": [_call(call_id)]})
        graph.append({"role": "tool", "tool_call_id": call_id, "content": "b " * value * 500})
    elif kind == "collapse":
        rounds = [n.id for n in graph.nodes() if n.role == "assistant"]
        if len(rounds) >= 3:
            first = rounds[value % (len(rounds) - 2)]
            with suppress(ContextError):  # a span a compaction covers: refused, no change
                engine.collapse(first, rounds[-2])
    elif kind == "compact" and len(graph) > 6:
        with suppress(ContextError):  # the newest rounds only (a long output's): no change
            engine.compact()
    elif kind == "rollback":
        active = graph.layers(active=True)
        if active:
            engine.rollback(active[value % len(active)].id, reason="test")
    elif kind == "budget":
        session.configure(budget=value)
    elif kind == "merge":
        session.configure(merge_same_role=value)
    elif kind == "back":  # the head back to an answer: an earlier request is the latest
        answers = [n.id for n in graph.nodes() if n.role == "assistant"]
        if answers:
            graph.fork(answers[value % len(answers)])


def _plain(rendered: Rendered) -> list[Any]:
    return [msgspec.structs.replace(s, render="") for s in rendered.sources]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
def test_a_resumed_render_sends_what_a_whole_one_does(ops: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        model = TestModel(default="ok")
        session = Session(
            ":memory:", model=model, system="Be brief.", state_dir=folder, history_tools=False
        )
        session.configure(budget=2_500)
        for n in range(8):
            session.graph.append({"role": "user", "content": f"old question {n}"})
            session.graph.append({"role": "assistant", "content": f"old answer {n}"})
        for step, (kind, value) in enumerate(ops):
            _apply(session, kind, value, step)
            engine = session.engine
            engine.incremental = False
            whole = engine.preview()
            engine.incremental = True
            resumed = engine.preview()
            assert resumed.messages == whole.messages
            assert (resumed.tokens, _plain(resumed)) == (whole.tokens, _plain(whole))
            assert session.llm() == "ok"
            assert model.requests[-1].messages == whole.messages
            receipt = session.receipt()
            assert receipt is not None and receipt.tokens == whole.tokens
            assert engine.last is not None and _plain(engine.last) == _plain(whole)
            assert list(receipt.sources) == _plain(whole)
            storage = ContextStorage(session.graph.store, session.id, migrate=False)
            sent = sent_prompt(storage, receipt)
            assert sent is not None and sent.messages == whole.messages
        session.close()
