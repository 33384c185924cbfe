"""The budget is a law and the request is kept (issue 32): every prompt fits the budget
whenever its core can, and the user's latest request is in it, however long the agent has
worked on its own since."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _context_helpers import call, start, tool_round

from context import ContextEngine, Policy, render_context, tool_pair_problems
from graph import ConversationGraph


def test_emergency_cuts_a_huge_tool_call_in_the_newest_round(tmp_path: Path) -> None:
    """A ``Write`` of a whole file is as long as any output, and the newest round is never
    dropped: its arguments are cut (inside the JSON strings) like any long text."""
    g = ConversationGraph.memory("s1")
    start(g, task="Write the exporter module.")
    body = "\n".join(f"def f{i}(x):\n    return x * {i}  # helper {i}" for i in range(3_000))
    arguments = json.dumps({"file_path": "src/export.py", "content": body})
    g.append(
        {"role": "assistant", "content": "Writing.", "tool_calls": [call("w1", "Write", arguments)]}
    )
    g.append({"role": "tool", "tool_call_id": "w1", "content": "File written."})
    for preset in ("claude-code", "progressive"):
        rendered = render_context(g, budget=4_000, policy=Policy.named(preset))
        assert rendered.fits, preset
        assert rendered.tokens <= 4_000
        sent = rendered.messages[-2]["tool_calls"][0]["function"]["arguments"]
        shown = json.loads(sent)  # still valid JSON
        assert shown["file_path"] == "src/export.py"
        assert shown["content"].startswith("def f0(x):") and "elided" in shown["content"]
        assert tool_pair_problems(rendered.messages) == []


def _work(g: ConversationGraph, steps: int, tag: str, size: int) -> None:
    for i in range(steps):
        lines = "\n".join(
            f"src/{tag}_{i}.py:{n}: value_{n} = compute_{tag}({n})" for n in range(size)
        )
        tool_round(g, [("Bash", lines)], prefix=f"{tag}{i}", content=f"step {tag} {i}")


def _holds(messages: list[dict[str, Any]], request: str) -> bool:
    """The request verbatim in one user message, or as its head and tail with the marker
    that says where to read the rest."""
    for message in messages:
        if message.get("role") != "user" or not isinstance(message.get("content"), str):
            continue
        text = message["content"]
        if request in text:
            return True
        head, _, rest = text.partition("\n[... ")
        tail = rest.partition(" ...]\n")[2]
        if rest and len(head) >= 80 and request.startswith(head) and request.endswith(tail):
            return True
    return False


@pytest.mark.parametrize("preset", ["claude-code", "progressive"])
@pytest.mark.parametrize("budget", [1_200, 2_000, 8_000])
@pytest.mark.parametrize("size", ["short", "huge"])
def test_the_request_survives_a_long_autonomous_run(preset: str, budget: int, size: str) -> None:
    """After a later request the agent works 60 steps on its own: every render holds it (a
    huge one as head and tail) and fits, while the rounds after it go."""
    g = ConversationGraph.memory("s1")
    start(g, task="Find the bug in the exporter.")
    _work(g, 10, "a", 30)
    g.append({"role": "assistant", "content": "Found it in src/export.py."})
    request = "Now fix src/export.py and run the whole suite until it is green."
    if size == "huge":
        request += " Here is the failing log:\n" + "\n".join(
            f"FAILED tests/test_export.py::test_case_{n} - AssertionError: {n}" for n in range(900)
        )
    g.append({"role": "user", "content": request})
    engine = ContextEngine(g, Policy.named(preset), budget=budget)
    for i in range(60):
        _work(g, 1, f"b{i}_", 400 if i % 7 == 0 else 25)  # now and then a long output
        rendered = engine.render()
        assert rendered.tokens <= budget, (i, rendered.tokens)
        assert _holds(rendered.messages, request), i
        assert rendered.messages[1]["content"] == "Find the bug in the exporter."
    assert "step a 0" not in str(rendered.messages)  # the rounds are free to go


def test_a_budget_under_the_request_s_floor_still_fits() -> None:
    """The request's floor yields when nothing else can shrink: the prompt still fits."""
    g = ConversationGraph.memory("s1")
    start(g)
    g.append({"role": "assistant", "content": "ok"})
    g.append({"role": "user", "content": "please " + "lorem ipsum dolor " * 400})
    g.append({"role": "assistant", "content": "on it"})
    rendered = render_context(g, budget=120, policy=Policy.named("claude-code"))
    assert rendered.fits, rendered.tokens
    assert any(str(m["content"]).startswith("please lorem") for m in rendered.messages)
