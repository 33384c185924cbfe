"""Benchmarks: appending 10,000 nodes to a SQLite session, and loading one back.

Normal runs pass ``--benchmark-disable``: each benchmark then runs once as a smoke test.
``pytest tests/graph/test_graph_bench.py --benchmark-enable`` measures them.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _graph_helpers import call

import graph
from graph import ConversationGraph

NODES = 10_000
_counter = itertools.count()


@pytest.fixture(autouse=True)
def _engines() -> Iterator[None]:
    yield
    graph.dispose_engines()


def _fill(g: ConversationGraph, nodes: int) -> None:
    """A mix of user turns, assistants with a tool call, and tool results (3 nodes a round)."""
    turn = 0
    while len(g) < nodes:
        turn += 1
        g.append({"role": "user", "content": f"step {turn}: run the tests"})
        if len(g) >= nodes:
            break
        g.append(
            {
                "role": "assistant",
                "content": "running them",
                "tool_calls": [call(f"call_{turn}", "bash", {"cmd": "pytest -q"})],
            }
        )
        g.append({"role": "tool", "tool_call_id": f"call_{turn}", "content": "3 passed"})


def _fresh_url(root: Path) -> str:
    return f"sqlite:///{root / f'bench-{next(_counter)}.db'}"


def test_bench_append_10k_nodes_sqlite(benchmark: Any, tmp_path: Path) -> None:
    def setup() -> tuple[tuple[ConversationGraph], dict[str, Any]]:
        graph.dispose_engines()
        g = ConversationGraph.open(_fresh_url(tmp_path), session="bench")
        return (g,), {}

    def run(g: ConversationGraph) -> ConversationGraph:
        _fill(g, NODES)
        return g

    g = benchmark.pedantic(run, setup=setup, rounds=3, iterations=1)
    assert len(g) == NODES
    assert g.last_seq > NODES  # tool results are events with their own seqs


@pytest.fixture(scope="module")
def stored_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bench-load") / "source.db"
    g = ConversationGraph.open(path, session="bench")
    with g.batch():
        _fill(g, NODES)
    g.close()
    graph.dispose_engines()
    return path


def test_bench_load_10k_node_session_sqlite(
    benchmark: Any, stored_session: Path, tmp_path: Path
) -> None:
    def setup() -> tuple[tuple[str], dict[str, Any]]:
        graph.dispose_engines()
        target = tmp_path / f"copy-{next(_counter)}.db"
        shutil.copyfile(stored_session, target)
        return (f"sqlite:///{target}",), {}

    def run(url: str) -> ConversationGraph:
        return ConversationGraph.open(url, session="bench")

    g = benchmark.pedantic(run, setup=setup, rounds=3, iterations=1)
    assert len(g) == NODES
    assert len(g.to_openai()) > NODES // 2
