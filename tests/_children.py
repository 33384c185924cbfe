"""Running ``_crash_child.py`` and checking a store after it: the concurrency and crash tests.

Every child gets a timeout (a watchdog kills it), so a hung child fails a test instead of
hanging the suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from context import (
    ContextEngine,
    ContextStorage,
    Policy,
    read_jsonl,
    records_path,
    tool_pair_problems,
)
from graph import ConversationGraph, Event

ROOT = Path(__file__).resolve().parents[1]
CHILD = Path(__file__).with_name("_crash_child.py")
TIMEOUT = 90.0
"""Longest any child may live (its own loop stops after 60 s)."""


@dataclass
class Child:
    """A running child and the acknowledgements it printed (read by a thread, so a full
    pipe never blocks it)."""

    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)
    stderr: str = ""

    def acked(self, kind: str) -> list[str]:
        return [line.split(" ", 1)[1] for line in self.lines if line.startswith(f"{kind} ")]


def start(mode: str, url: str, session: str, state_dir: Path, seed: int, *extra: str) -> Child:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, str(CHILD), mode, url, session, str(state_dir), str(seed), *extra]
    process = subprocess.Popen(
        argv,
        cwd=state_dir,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    child = Child(process)
    threading.Thread(target=_read, args=(child,), daemon=True).start()
    watchdog = threading.Timer(TIMEOUT, _kill, args=(process,))
    watchdog.daemon = True
    watchdog.start()
    return child


def _read(child: Child) -> None:
    assert child.process.stdout is not None
    for line in child.process.stdout:
        if not line.endswith("\n"):
            break  # torn by the kill: never acknowledged
        child.lines.append(line.rstrip("\n"))
        if line.startswith("ready"):
            child.ready.set()
    child.finished.set()
    child.ready.set()


def _kill(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)


def wait_ready(child: Child) -> None:
    assert child.ready.wait(TIMEOUT), "the child never got ready"
    if not any(line.startswith("ready") for line in child.lines):
        raise AssertionError(f"the child died before it was ready:\n{finish(child)}")


def finish(child: Child, *, kill: bool = False) -> str:
    """Kill (if asked) and reap the child; close its pipes; return its stderr (again)."""
    if kill:
        _kill(child.process)
    try:
        child.process.wait(TIMEOUT)
    except subprocess.TimeoutExpired:
        _kill(child.process)
        child.process.wait(TIMEOUT)
    child.finished.wait(TIMEOUT)
    for stream in (child.process.stdin, child.process.stdout, child.process.stderr):
        if stream is not None and not stream.closed:
            if stream is child.process.stderr:
                child.stderr = stream.read()
            stream.close()
    return child.stderr


def seqs(graph: ConversationGraph) -> list[int]:
    """Every stored record's seq (nodes, results, finishes, forks, layers, rollbacks)."""
    return sorted(r.seq if isinstance(r, Event) else r[0].seq for r in graph.state.records)


def check_session(
    url: str,
    session: str,
    state_dir: Path,
    *,
    nodes: Sequence[str] = (),
    layers: Sequence[str] = (),
    records: Sequence[str] = (),
    budget: int = 2_500,
    kills: int = 0,
) -> ConversationGraph:
    """What must hold of a session however its writers ended: everything acknowledged is
    there, seqs are 1..n once each, layers are whole, it reopens and renders a valid prompt,
    and its records read (at most ``kills`` torn JSONL lines, each skipped with a warning)."""
    graph = ConversationGraph.open(url, session=session)
    assert graph.repairs == []
    assert seqs(graph) == list(range(1, graph.last_seq + 1))
    stored = {n.id for n in graph.nodes()}
    assert set(nodes) <= stored, f"lost acknowledged nodes: {sorted(set(nodes) - stored)}"
    found = {info.id: info for info in graph.layers()}
    assert set(layers) <= set(found), f"lost layers: {sorted(set(layers) - set(found))}"
    for info in found.values():
        assert info.covers and set(info.covers) <= stored, f"layer {info.id} covers lost nodes"
        assert set(info.builds_on) <= set(found)
    policy = Policy(offload_chars=1_500, offload_share=None)
    engine = ContextEngine(graph, policy, budget=budget, state_dir=state_dir)
    rendered = engine.render()
    assert tool_pair_problems(rendered.messages) == []
    assert rendered.fits, rendered.actions
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logged = [r.id for r in read_jsonl(records_path(state_dir, session))]
    assert all("skipping a line" in str(w.message) for w in caught), caught
    assert len(caught) <= kills
    in_db = [r.id for r in engine.records()]
    assert len(set(in_db)) == len(in_db)
    assert set(records) <= set(in_db) and set(records) <= set(logged)
    ContextStorage(graph.store, session, state_dir).read_records()
    return graph
