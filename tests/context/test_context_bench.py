"""Per-turn render time of a ContextEngine over a synthetic session, under a 32k budget.

The graph is built first; the benchmarked function renders at every successive head
(each round's assistant node, in order) with one fresh engine, as an agent loop would
render once per turn. Run with ``--benchmark-enable`` for figures; the per-turn mean is
in ``extra_info["per_turn_ms"]`` (the benchmark's mean divided by the number of turns).
Without it (the default) only every 50th turn is rendered, once, as a smoke test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _context_helpers import policy, start, tool_round

from context import ContextEngine, Policy
from graph import ConversationGraph

TOOLS = ("Bash", "read_file", "grep", "deploy")


def session(rounds: int) -> tuple[ConversationGraph, list[str]]:
    g = ConversationGraph.memory("bench")
    start(g, system="You are a careful coding agent. " * 20, task="Fix the failing tests.")
    heads: list[str] = []
    for i in range(rounds):
        g.append({"role": "user", "content": f"Continue with step {i}."})
        size = 12_000 if i % 40 == 7 else 6_000 if i % 9 == 3 else 300 + (i * 37) % 900
        output = "".join(f"{i}:{line} result text here\n" for line in range(size // 24))
        node = tool_round(
            g, [(TOOLS[i % len(TOOLS)], output)], prefix=f"c{i}", content=f"Step {i}: running."
        )
        heads.append(node.id)
    return g, heads


@pytest.mark.parametrize("rounds", [200, 2_000])
def test_render_every_turn(benchmark: Any, tmp_path: Path, rounds: int) -> None:
    g, heads = session(rounds)
    pol = policy(tmp_path)
    if benchmark.disabled:  # a plain test run: a smoke test over every 50th turn
        heads = heads[::50]

    def fresh() -> tuple[tuple[ContextEngine], dict[str, Any]]:
        return (ContextEngine(g, pol, budget=32_000),), {}

    def every_turn(engine: ContextEngine) -> int:
        worst = 0
        for head in heads:
            rendered = engine.render(head=head)
            worst = max(worst, rendered.tokens - rendered.budget)
        return worst

    over = benchmark.pedantic(every_turn, setup=fresh, rounds=3, iterations=1)
    assert over <= 0  # every turn fit
    if benchmark.stats is not None:
        per_turn = benchmark.stats.stats.mean / len(heads) * 1_000
        benchmark.extra_info["per_turn_ms"] = round(per_turn, 3)


def test_render_huge_output_with_a_fresh_engine(benchmark: Any, tmp_path: Path) -> None:
    """A fresh engine's render of a session holding one huge tool output, after its first
    offload: 100 MB measured (``--benchmark-enable``), 20 MB as the default smoke test."""
    size = (20 if benchmark.disabled else 100) * 1024 * 1024
    g = ConversationGraph.memory("huge")
    start(g, system="You are a careful coding agent.", task="Build it.")
    line = "src/app/main.py:12 ERROR parse_header failed é\n"
    tool_round(g, [("Bash", line * (size // len(line)))], prefix="h", content="Building.")
    pol = Policy()
    first = ContextEngine(g, pol, budget=32_000).render()  # writes the offload file

    def fresh() -> tuple[tuple[ContextEngine], dict[str, Any]]:
        return (ContextEngine(g, pol, budget=32_000),), {}

    rendered = benchmark.pedantic(lambda e: e.render(), setup=fresh, rounds=3, iterations=1)
    assert rendered.messages == first.messages and rendered.fits


@pytest.mark.parametrize("shape", ["one string", "6,400 parts"])
def test_render_a_50mb_output(benchmark: Any, tmp_path: Path, shape: str) -> None:
    """The same 50 MB renders in about the same time as one string and as 6,400 parts of
    8,000 characters (the bound on exact counting is on the total, not on each part)."""
    part = ("word " * 1_600)[:8_000]
    parts = 64 if benchmark.disabled else 6_400
    content: Any = (
        part * parts if shape == "one string" else [{"type": "text", "text": part}] * parts
    )

    def fresh() -> tuple[tuple[ContextEngine], dict[str, Any]]:
        g = ConversationGraph.memory()
        g.append({"role": "user", "content": "read it"})
        calls = [{"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}]
        g.append({"role": "assistant", "content": None, "tool_calls": calls})
        g.append({"role": "tool", "tool_call_id": "c1", "content": content})
        engine = ContextEngine(g, Policy(), budget=32_000, state_dir=tmp_path / shape)
        engine.counter.count_text("warm the tokenizer")
        return (engine,), {}

    rendered = benchmark.pedantic(lambda e: e.render(), setup=fresh, rounds=3, iterations=1)
    assert rendered.fits
