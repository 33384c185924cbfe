"""Frame renders (inside a running function) and usage anchoring."""

from __future__ import annotations

from pathlib import Path

from context import ContextEngine, Policy
from graph import ConversationGraph


def _outer(g: ConversationGraph, rounds: int) -> None:
    g.append({"role": "system", "content": "outer system"})
    g.append({"role": "user", "content": "outer task"})
    for i in range(rounds):
        g.append({"role": "user", "content": f"outer question {i}"})
        g.append({"role": "assistant", "content": f"outer answer {i}"})


def test_frame_render_shows_callers_then_own_chain(tmp_path: Path) -> None:
    g = ConversationGraph.memory("frames")
    _outer(g, 3)
    with g.function("research", input={"q": "x"}) as fn:
        g.append({"role": "user", "content": "inner task"})
        g.append({"role": "assistant", "content": "inner step"})
        rendered = ContextEngine(g, Policy(), budget=10_000).render(frame=fn.id)
    contents = [m["content"] for m in rendered.messages]
    assert contents == [
        "outer system",
        "outer task",
        "outer question 0",
        "outer answer 0",
        "outer question 1",
        "outer answer 1",
        "outer question 2",
        "outer answer 2",
        "inner task",
        "inner step",
    ]


def test_callers_setting_caps_the_caller_chain(tmp_path: Path) -> None:
    g = ConversationGraph.memory("capped")
    _outer(g, 3)
    with g.function("research") as fn:
        g.append({"role": "user", "content": "inner task"})
        g.append({"role": "assistant", "content": "inner step"})
        policy = Policy(callers=1)
        rendered = ContextEngine(g, policy, budget=10_000).render(frame=fn.id)
    contents = [m["content"] for m in rendered.messages]
    assert contents == [
        "outer system",
        "outer task",
        "outer question 2",
        "outer answer 2",
        "inner task",
        "inner step",
    ]


def test_reported_usage_tightens_the_effective_budget(tmp_path: Path) -> None:
    g = ConversationGraph.memory("anchor")
    g.append({"role": "user", "content": "task"})
    for i in range(40):
        g.append({"role": "assistant", "content": f"step {i} " + "word " * 40})
    engine = ContextEngine(g, Policy(), budget=3_000)
    first = engine.render()
    shrinking = ("collapse", "compact", "snip")
    assert first.fits and not [a for a in first.actions if a.tier in shrinking]
    engine.anchor_usage(first.tokens * 2)  # the provider counted twice what we estimated
    second = engine.render()
    assert engine.anchor.ratio > 1.5
    assert {a.tier for a in second.actions} & set(shrinking)
    assert second.tokens * engine.anchor.ratio <= 3_000 + 1
