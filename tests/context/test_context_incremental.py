"""An engine that extends its walk renders exactly what one that walks in full renders."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context import ContextEngine, Policy, Rendered

# internal: the incremental layout's reuse is the subject
from context._render._layout import Layout
from graph import ConversationGraph


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
