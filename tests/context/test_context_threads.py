"""Two threads appending to and rendering one session through one ``ContextEngine``: the
engine holds the graph's lock while it renders, so every prompt has valid tool pairs and
fits, and the store ends up equal to the live graph."""

from __future__ import annotations

import contextlib
import random
import threading
from pathlib import Path

import pytest

from context import ContextEngine, ContextError, Policy, Rendered, tool_pair_problems
from graph import ConversationGraph

ITERATIONS = 30


pytestmark = pytest.mark.usefixtures("switch_often")


def _call(call_id: str) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": "{}"}}


def _check(rendered: Rendered, problems: list[str], where: str) -> None:
    if tool_pair_problems(rendered.messages):
        problems.append(f"{where}: {tool_pair_problems(rendered.messages)}")
    if not rendered.fits:  # the core (system, task, newest round) is far below the budget
        problems.append(f"{where}: {rendered.tokens} tokens over {rendered.budget}")


def test_two_threads_append_and_render_through_one_engine(store_url: str, tmp_path: Path) -> None:
    graph = ConversationGraph.open(store_url, session="s")
    graph.append({"role": "system", "content": "You are terse."})
    graph.append({"role": "user", "content": "The task: find the bug."})
    policy = Policy(offload_chars=1_500, collapse_min_rounds=1)
    engine = ContextEngine(graph, policy, budget=2_000)
    problems: list[str] = []
    start = threading.Barrier(2, timeout=60)

    def work(name: str) -> None:
        rng = random.Random(name)
        try:
            start.wait()
            for index in range(ITERATIONS):
                tag = f"{name}{index}"
                graph.append({"role": "user", "content": f"{tag}: look again"})
                graph.append({"role": "assistant", "content": None, "tool_calls": [_call(tag)]})
                _check(engine.render(), problems, f"{tag} pending")
                size = rng.choice([50, 500, 3_000])  # 3,000 characters are offloaded
                output = "\n".join(f"{tag} line {i}" for i in range(size // 12))
                graph.append({"role": "tool", "tool_call_id": tag, "content": output})
                graph.append({"role": "assistant", "content": f"{tag}: seen"})
                _check(engine.render(), problems, f"{tag} answered")
                if index % 10 == 9:  # (the other thread's compaction may leave nothing)
                    with contextlib.suppress(ContextError):
                        engine.compact()
        except Exception as error:  # reported by the main thread
            problems.append(f"{name}: {error!r}")

    threads = [threading.Thread(target=work, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads)
    assert problems == []
    reopened = ConversationGraph.open(store_url, session="s")
    assert reopened.nodes() == graph.nodes()
    assert reopened.events() == graph.events()
    assert reopened.layers() == graph.layers() and graph.layers()
    assert reopened.repairs == []
    fresh = ContextEngine(reopened, policy, budget=2_000).render()
    assert tool_pair_problems(fresh.messages) == [] and fresh.fits
    assert engine.records()
