"""The file paths under fault injection (``tests/_faults.py``): each ``os.write``,
``replace``, ``unlink``, ``rmdir``, ``mkdir`` … (and each statement, where a database is
written) fails in turn during records, offload, gc and delete. After each failure the
JSONL and the database agree or the difference is pending, nothing outside the state
folder is touched, and once the fault is gone the next write catches up.

Small in ``make test``; ``OPENPROGRAM_FAULTS=large`` runs more records, outputs and modes.
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from _context_helpers import policy, start, tool_round
from _faults import (
    WRITES,
    Faults,
    Point,
    each_fault,
    injected,
    large,
    leftovers,
    snapshot,
)

from context import (
    CompactionRecord,
    ContextEngine,
    ContextStorage,
    collect_garbage,
    delete_session,
    read_jsonl,
    records_path,
)
from graph import ConversationGraph, SQLStore

SECRET = b"ssh-ed25519 AAAA... never touched\n"
RECORDS = 12 if large() else 3
OUTPUTS = 6 if large() else 2
MODES = ["error", "full"]


def make_records(count: int, start_at: int = 0) -> list[CompactionRecord]:
    return [
        CompactionRecord(
            id=f"R{start_at + i:04d}",
            session="s1",
            timestamp="2026-12-01T00:00:00Z",
            tier="offload",
            tokens_before=1_000 + i,
            tokens_after=100,
            messages_before=4,
            messages_after=4,
            details={"pad": "p" * (50 + 37 * i)},
        )
        for i in range(count)
    ]


def agree_or_pending(storage: ContextStorage, made: list[CompactionRecord]) -> None:
    """The JSONL and the database each hold every record made, once, or have it pending."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a torn or damaged line would warn
        logged = [r.id for r in read_jsonl(records_path(storage.state_dir, storage.session))]
    stored = [r.id for r in storage.read_records()]
    unlogged = {r.id for r in storage._unlogged}
    unsaved = {r.id for r, _ in storage._unsaved}
    everything = {r.id for r in made}
    assert len(logged) == len(set(logged)), f"a record logged twice: {logged}"
    assert len(stored) == len(set(stored)), f"a record stored twice: {stored}"
    assert set(logged).isdisjoint(unlogged) and set(stored).isdisjoint(unsaved)
    assert set(logged) | unlogged == everything
    assert set(stored) | unsaved == everything


def caught_up(storage: ContextStorage, made: list[CompactionRecord]) -> None:
    """Once space is freed, one more write and both copies hold every record in order."""
    assert storage.save_records([], 1) == []
    assert storage.pending == 0
    ids = [r.id for r in made]
    assert [r.id for r in read_jsonl(records_path(storage.state_dir, "s1"))] == ids
    assert sorted(r.id for r in storage.read_records()) == sorted(ids)


def outside_of(folder: Path) -> Path:
    outside = folder / "outside"
    (outside / "s1").mkdir(parents=True)
    (outside / "authorized_keys").write_bytes(SECRET)
    (outside / "s1.jsonl").write_bytes(SECRET)
    return outside


def outside_state(folder: Path, state: Path) -> dict[str, str]:
    """Everything in ``folder`` but the state folder and the database."""

    def ours(path: Path) -> bool:
        return path == state or path.name.startswith("op.db")

    return snapshot(folder, skip=ours)


def untouched_outside(folder: Path, state: Path, before: dict[str, str]) -> None:
    assert outside_state(folder, state) == before


# -- records: the JSONL write loop (defect 6) -----------------------------------------------


@pytest.mark.parametrize("whole", [0, 1, 2])
def test_a_short_write_on_a_full_disk_keeps_the_rest_pending_and_catches_up(
    tmp_path: Path, whole: int
) -> None:
    graph = ConversationGraph.open(tmp_path / "op.db", session="s1")
    graph.append({"role": "user", "content": "hi"})
    storage = ContextStorage(graph.store, "s1", tmp_path / "state")
    made = make_records(3)
    # The disk fills during the write of a record: half of it is written, then ENOSPC.
    faults = Faults(kinds=("write",), fail_at=whole, mode="full")
    with injected(faults):
        problems = storage.save_records(made, 1)
    [problem] = problems
    assert f"{3 - whole} record(s) not in the JSONL log" in problem
    assert f"{whole} of 3 line(s) written" in problem
    assert storage.pending == 3 - whole
    log = records_path(tmp_path / "state", "s1")
    assert [r.id for r in read_jsonl(log)] == [r.id for r in made[:whole]]  # no torn half
    assert not log.read_bytes() or log.read_bytes().endswith(b"\n")
    agree_or_pending(storage, made)
    with injected(faults):  # still full: nothing more, nothing twice
        assert len(storage.save_records([], 1)) == 1
    agree_or_pending(storage, made)
    faults.clear()  # space freed
    caught_up(storage, made)
    graph.close()


@dataclass
class RecordsRun:
    graph: ConversationGraph
    storage: ContextStorage
    made: list[CompactionRecord]
    folder: Path
    before: dict[str, str] = field(default_factory=dict)


def _records_run(folder: Path) -> RecordsRun:
    outside_of(folder)
    graph = ConversationGraph.open(folder / "op.db", session="s1")
    graph.append({"role": "user", "content": "hi"})
    storage = ContextStorage(graph.store, "s1", folder / "state")
    assert storage.save_records(make_records(1, start_at=900), 1) == []  # a log already there
    run = RecordsRun(graph, storage, make_records(RECORDS), folder)
    run.made = [*make_records(1, start_at=900), *run.made]
    run.before = outside_state(folder, folder / "state")
    return run


def _records_check(run: RecordsRun, faults: Faults) -> None:
    try:
        agree_or_pending(run.storage, run.made)
        untouched_outside(run.folder, run.folder / "state", run.before)
        caught_up(run.storage, run.made)
    finally:
        run.graph.close()


def _engines(run: Any) -> list[Any]:
    store = run.graph.store
    return [store.engine] if isinstance(store, SQLStore) else []


@pytest.mark.parametrize("mode", MODES)
def test_records_under_each_file_fault(tmp_path: Path, mode: str) -> None:
    fired = each_fault(
        tmp_path,
        _records_run,
        lambda run: run.storage.save_records(run.made[1:], 1),
        _records_check,
        mode=mode,
    )
    assert [p.kind for p in fired].count("write") == RECORDS


@pytest.mark.parametrize("mode", MODES)
def test_records_under_each_statement_and_file_fault(tmp_path: Path, mode: str) -> None:
    fired = each_fault(
        tmp_path,
        _records_run,
        lambda run: run.storage.save_records(run.made[1:], 1),
        _records_check,
        kinds=(*WRITES, "sql"),
        mode=mode,
        engines=_engines,
    )
    assert {"sql", "write", "mkdir"} <= {p.kind for p in fired}


# -- offload: files written by a render ------------------------------------------------------


@dataclass
class RenderRun:
    graph: ConversationGraph
    engine: ContextEngine
    folder: Path
    state: Path
    outputs: dict[str, str]
    before: dict[str, str] = field(default_factory=dict)


def _render_run(folder: Path) -> RenderRun:
    outside_of(folder)
    graph = ConversationGraph.open(folder / "op.db", session="s1")
    start(graph)
    outputs = {}
    for i in range(OUTPUTS):
        text = "".join(f"row {i}.{j:04d} " + "v" * 40 + "\n" for j in range(300))
        node = tool_round(graph, [("Read", text)], prefix=f"r{i}")
        outputs[graph.tools(node.id)[0].id] = text
        graph.append({"role": "assistant", "content": f"read {i}"})
    pol = policy(folder)
    state = folder / "state"
    run = RenderRun(
        graph, ContextEngine(graph, pol, budget=100_000, state_dir=state), folder, state, outputs
    )
    run.before = outside_state(folder, state)
    return run


def _render_check(run: RenderRun, faults: Faults) -> None:
    try:
        assert faults.raised is None, f"a render raised: {faults.raised!r}"  # fails open
        untouched_outside(run.folder, run.state, run.before)
        if not (faults.fired and faults.fired.kind == "unlink"):
            assert leftovers(run.state) == []
        storage = run.engine.storage
        assert storage is not None
        made = run.engine.records()
        agree_or_pending(storage, made)
        again = run.engine.render()
        assert storage.pending == 0
        logged = list(read_jsonl(records_path(run.state, "s1")))
        assert logged == run.engine.records() == [*made, *again.records]
        for node, text in run.outputs.items():
            path = run.state / "tool_results" / "s1" / f"{node}.txt"
            assert not path.exists() or path.read_text() == text
    finally:
        run.graph.close()


@pytest.mark.parametrize("mode", MODES)
def test_offload_under_each_file_fault(tmp_path: Path, mode: str) -> None:
    fired = each_fault(
        tmp_path, _render_run, lambda run: run.engine.render(), _render_check, mode=mode
    )
    assert {"write", "replace", "mkdir"} <= {p.kind for p in fired}


# -- gc and delete ---------------------------------------------------------------------------


@dataclass
class RemovalRun:
    graph: ConversationGraph
    folder: Path
    state: Path
    node: str
    other: str
    before: dict[str, str] = field(default_factory=dict)


def _removal_run(folder: Path) -> RemovalRun:
    outside = outside_of(folder)
    state = folder / "state"
    graph = ConversationGraph.open(folder / "op.db", session="s1")
    node = graph.append({"role": "user", "content": "hi"}).id
    other = ConversationGraph(graph.store, "s2")
    other_node = other.append({"role": "user", "content": "there"}).id
    live = state / "tool_results" / "s1"
    (live / "planted" / "deeper").mkdir(parents=True)
    (live / f"{node}.txt").write_text("kept")
    (live / "01STALE.txt").write_text("stale")
    (live / "planted" / "deeper" / "x").write_text("x")
    (live / "keys").symlink_to(outside / "authorized_keys")
    (state / "tool_results" / "s2").mkdir()
    (state / "tool_results" / "s2" / f"{other_node}.txt").write_text("another session's")
    (state / "tool_results" / "gone").mkdir()
    (state / "tool_results" / "gone" / "01X.txt").write_text("x")
    (state / "tool_results" / "gone" / "escape").symlink_to(outside, target_is_directory=True)
    os.mkfifo(state / "tool_results" / "gone" / "pipe")
    (state / "records").mkdir()
    for name in ("s1", "s2", "gone"):
        (state / "records" / f"{name}.jsonl").write_text("{}\n")
    old = time.time() - 3_600
    os.utime(live / "01STALE.txt", (old, old))
    run = RemovalRun(graph, folder, state, node, other_node)
    run.before = outside_state(folder, state)
    return run


def _gc(run: RemovalRun) -> object:
    return collect_garbage(run.graph.store, run.state)


def _gc_check(run: RemovalRun, faults: Faults) -> None:
    try:
        assert faults.raised is None or isinstance(faults.raised, OSError)
        untouched_outside(run.folder, run.state, run.before)
        live = run.state / "tool_results" / "s1" / f"{run.node}.txt"
        assert live.read_text() == "kept"
        assert (run.state / "tool_results" / "s2" / f"{run.other}.txt").exists()
        final = collect_garbage(run.graph.store, run.state)
        assert final.refused == []
        assert sorted(str(p.relative_to(run.state)) for p in run.state.rglob("*")) == [
            "records",
            "records/s1.jsonl",
            "records/s2.jsonl",
            "tool_results",
            "tool_results/s1",
            f"tool_results/s1/{run.node}.txt",
            "tool_results/s2",
            f"tool_results/s2/{run.other}.txt",
        ]
    finally:
        run.graph.close()


def test_gc_under_each_file_fault(tmp_path: Path) -> None:
    fired = each_fault(tmp_path, _removal_run, _gc, _gc_check)
    assert {"unlink", "rmdir"} <= {p.kind for p in fired}


def _delete(run: RemovalRun) -> object:
    with warnings.catch_warnings(record=True):
        return delete_session(run.graph.store, "s1", run.state)


def _delete_check(run: RemovalRun, faults: Faults) -> None:
    try:
        untouched_outside(run.folder, run.state, run.before)
        assert (run.state / "tool_results" / "s2" / f"{run.other}.txt").exists()
        report = delete_session(run.graph.store, "s1", run.state)  # retried: completes
        assert report.refused == []
        assert not (run.state / "tool_results" / "s1").exists()
        assert not (run.state / "records" / "s1.jsonl").exists()
        assert "s1" not in [s.id for s in run.graph.store.sessions()]
        assert (run.state / "records" / "s2.jsonl").exists()
    finally:
        run.graph.close()


def test_delete_under_each_statement_and_file_fault(tmp_path: Path) -> None:
    fired: list[Point] = each_fault(
        tmp_path,
        _removal_run,
        _delete,
        _delete_check,
        kinds=(*WRITES, "sql"),
        engines=_engines,
    )
    assert {"unlink", "rmdir", "sql"} <= {p.kind for p in fired}
