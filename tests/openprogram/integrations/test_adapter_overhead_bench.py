"""Benchmarks: what each adapter adds to its framework's request (issue 35, item 4).

Each framework's own fake model answers; the history holds 1,000 messages (500 rounds).
"alone" is the framework with that history and no adapter, "adapter" the same agent with
the adapter over a session already holding the history. ``test_bench_adapter_request``
times one request after the first; ``test_bench_adapter_first_request`` times a fresh
process whose first request is counted from the framework's first model call after the
agent is built (``extra_info["first_request_ms"]``; the build before it, where the adapter
reads its session ahead, is ``extra_info["build_ms"]``; the process's wall time is the
benchmark's own figure). Normal runs pass ``--benchmark-disable`` (each runs once, as a
smoke test); ``pytest tests/openprogram/integrations/test_adapter_overhead_bench.py
--benchmark-enable`` measures them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _overhead import (
    ANSWER,
    FRAMEWORKS,
    MESSAGES,
    agents_sdk_own_session,
    collect_leftovers,
    open_session,
    request,
)

MODULES = {"pydantic_ai": "pydantic_ai", "langchain": "langchain", "openai_agents": "agents"}
pytestmark = pytest.mark.filterwarnings(
    "ignore:asynchronous generator:ResourceWarning"
)  # Pydantic AI's run iterators, collected after run_sync closed their loop
SCRIPT = Path(__file__).with_name("_overhead.py")
ROOT = Path(__file__).parents[3]
"""The checkout under test (the fresh process imports it, not an installed copy)."""


@pytest.fixture(autouse=True)
def _collected() -> Iterator[None]:
    """Each test's leftovers collected here, where the warning above is ignored, not in a
    later module's test."""
    yield
    collect_leftovers()


def _stored(db: Path) -> int:
    session = open_session(db)
    try:
        return len(session.graph)
    finally:
        session.close()


@pytest.mark.parametrize("mode", ["alone", "adapter"])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_bench_adapter_request(benchmark: Any, tmp_path: Path, framework: str, mode: str) -> None:
    pytest.importorskip(MODULES[framework])
    db = tmp_path / "op.db"
    run = request(framework, mode == "adapter", db)
    assert run() == ANSWER  # the first request (the adapter stores the history) is not timed
    answer = benchmark.pedantic(run, rounds=30, iterations=1, warmup_rounds=2)
    assert answer == ANSWER
    if mode == "adapter":
        assert _stored(db) >= MESSAGES


def test_bench_agents_sdk_own_session_request(benchmark: Any, tmp_path: Path) -> None:
    """The Agents SDK over its own ``SQLiteSession`` with the same history: the part of the
    adapter's figure any SDK ``Session`` pays (``openai_agents-alone`` passes the list)."""
    pytest.importorskip("agents")
    run = agents_sdk_own_session(tmp_path / "sdk.db")
    assert run() == ANSWER
    assert benchmark.pedantic(run, rounds=30, iterations=1, warmup_rounds=2) == ANSWER


@pytest.mark.parametrize("mode", ["alone", "adapter"])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_bench_adapter_first_request(
    benchmark: Any, tmp_path: Path, framework: str, mode: str
) -> None:
    pytest.importorskip(MODULES[framework])
    db = tmp_path / "op.db"
    firsts: list[float] = []
    builds: list[float] = []

    def fresh_process(mode: str = mode) -> None:
        argv = [sys.executable, str(SCRIPT), framework, mode, str(db)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(argv, capture_output=True, text=True, check=True, env=env)
        build, first = done.stdout.split()[-2:]
        builds.append(float(build) * 1000)
        firsts.append(float(first) * 1000)

    fresh_process("adapter")  # the session holds the history (in a process of its own too)
    firsts.clear()
    builds.clear()

    benchmark.pedantic(fresh_process, rounds=3, iterations=1)
    firsts.sort()
    builds.sort()
    benchmark.extra_info["first_request_ms"] = firsts[len(firsts) // 2]
    benchmark.extra_info["build_ms"] = builds[len(builds) // 2]  # the adapter reads ahead here
    assert firsts[0] > 0
