"""The records log and the state folder: a JSONL that cannot be written fails open and is
retried; planted symlinks never make a write land outside the state folder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _context_helpers import policy, start, tool_round
from _faults import EVERY_CALL, Faults, count_points, injected

from context import (
    ContextEngine,
    Policy,
    read_jsonl,
    records_path,
    tool_pair_problems,
)
from graph import ConversationGraph, MemoryStore

BIG = "".join(f"row {i:05d} " + "v" * 50 + "\n" for i in range(250))  # 15,000 chars
SECRET = b"ssh-ed25519 AAAA... do not overwrite\n"


@pytest.fixture
def g(tmp_path: Path) -> Iterator[ConversationGraph]:
    graph = ConversationGraph.open(tmp_path / "op.db", session="s1")
    try:
        yield graph
    finally:
        graph.close()


def state_in(tmp_path: Path) -> Path:
    """The state folder these tests name (they plant links in it before it is used)."""
    return tmp_path / ".openprogram"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the state folder, holding a file nobody may touch."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "authorized_keys").write_bytes(SECRET)
    (folder / "s1.jsonl").write_bytes(SECRET)
    return folder


def untouched(folder: Path) -> None:
    assert sorted(p.name for p in folder.iterdir()) == ["authorized_keys", "s1.jsonl"]
    assert (folder / "authorized_keys").read_bytes() == SECRET
    assert (folder / "s1.jsonl").read_bytes() == SECRET


def big_round(g: ConversationGraph, prefix: str, extra: str = "") -> str:
    """A round whose output offload writes to a file (and records); its tool node id."""
    node = tool_round(g, [("Read", BIG + extra)], prefix=prefix)
    g.append({"role": "assistant", "content": f"read {prefix}"})
    return g.tools(node.id)[0].id


def record_problems(rendered: Any) -> list[str]:
    return [a.error for a in rendered.actions if a.tier == "records"]


# -- the JSONL log fails open and is retried ------------------------------------------------


def _symlinked_records(state: Path, outside: Path) -> None:
    state.mkdir(parents=True, exist_ok=True)
    (state / "records").symlink_to(outside, target_is_directory=True)


def _symlinked_file(state: Path, outside: Path) -> None:
    (state / "records").mkdir(parents=True)
    (state / "records" / "s1.jsonl").symlink_to(outside / "s1.jsonl")


def _directory(state: Path, outside: Path) -> None:
    (state / "records" / "s1.jsonl").mkdir(parents=True)


def _undo(state: Path) -> None:
    target = state / "records"
    if target.is_symlink():
        target.unlink()
    elif (target / "s1.jsonl").is_symlink():
        (target / "s1.jsonl").unlink()
    elif (target / "s1.jsonl").is_dir():
        (target / "s1.jsonl").rmdir()


@pytest.mark.parametrize(
    "plant",
    [_symlinked_records, _symlinked_file, _directory],
    ids=["records-folder-symlink", "records-file-symlink", "records-file-is-a-folder"],
)
def test_an_unwritable_jsonl_fails_open_and_is_retried(
    g: ConversationGraph, tmp_path: Path, outside: Path, plant: Any
) -> None:
    pol = policy(tmp_path)
    state = state_in(tmp_path)
    start(g)
    big_round(g, "a")
    plant(state, outside)
    e = ContextEngine(g, pol, budget=100_000, state_dir=state_in(tmp_path))
    rendered = e.render()
    assert rendered.fits and tool_pair_problems(rendered.messages) == []
    [record] = rendered.records
    assert record.tier == "offload" and record.error is None
    [problem] = record_problems(rendered)
    assert "1 record(s) not in the JSONL log" in problem
    assert e.records() == [record]  # the database copy is written anyway
    assert e.storage is not None and e.storage.pending == 1
    untouched(outside)

    # Still broken: still said, still pending, still nothing outside.
    again = e.render()
    assert again.messages == rendered.messages
    assert len(record_problems(again)) == 1
    untouched(outside)

    # Fixed: the next render writes the pending line, once.
    _undo(state)
    later = e.render()
    assert record_problems(later) == [] and later.records == []
    assert list(read_jsonl(records_path(state, "s1"))) == [record]
    assert e.storage.pending == 0
    big_round(g, "b", "x")
    [second] = e.render().records
    assert list(read_jsonl(records_path(state, "s1"))) == [record, second]
    assert e.records() == [record, second]
    untouched(outside)


def test_an_injected_os_error_fails_open_and_is_retried(
    g: ConversationGraph, tmp_path: Path
) -> None:
    pol = policy(tmp_path)
    start(g)
    big_round(g, "a")
    records = "s1.jsonl"  # opened by name within the records folder
    twin = g.clone(MemoryStore(), "s1")  # the same render, counted where nothing fails
    points = count_points(
        ContextEngine(twin, pol, budget=100_000, state_dir=tmp_path / "twin").render,
        kinds=EVERY_CALL,
    )
    [opening] = [p for p in points if p.kind == "open" and p.detail == records]
    faults = Faults(kinds=EVERY_CALL, fail_at=opening.index, mode="full")
    e = ContextEngine(g, pol, budget=100_000, state_dir=state_in(tmp_path))
    with injected(faults):  # the disk is full when the records log is opened
        rendered = e.render()
    assert faults.fired is not None and faults.fired.detail == records
    [record] = rendered.records
    [problem] = record_problems(rendered)
    assert "No space left on device" in problem
    assert e.records() == [record]
    assert not records_path(state_in(tmp_path), "s1").exists()
    assert [p for p in faults.seen if p.detail == records] == [faults.fired]  # tried once

    assert record_problems(e.render()) == []
    assert list(read_jsonl(records_path(state_in(tmp_path), "s1"))) == [record]


def test_a_broken_records_log_does_not_stop_records_made_outside_a_render(
    g: ConversationGraph, tmp_path: Path, outside: Path
) -> None:
    # A rollback's record goes through the same fail-open path.
    pol = policy(tmp_path)
    start(g)
    ids = []
    for i in range(8):
        ids.append(g.append({"role": "user", "content": f"step {i}"}).id)
        g.append({"role": "assistant", "content": f"done {i}"})
    _symlinked_records(state_in(tmp_path), outside)
    e = ContextEngine(g, pol, budget=100_000, state_dir=state_in(tmp_path))
    layer = e.collapse(ids[0], ids[5])
    e.rollback(layer.id)
    assert [r.tier for r in e.records()] == ["collapse", "rollback"]
    untouched(outside)
    _undo(state_in(tmp_path))
    e.render()
    assert [r.tier for r in read_jsonl(records_path(state_in(tmp_path), "s1"))] == [
        "collapse",
        "rollback",
    ]


# -- offload never writes outside the state folder -----------------------------------------


def test_a_symlinked_session_folder_makes_offload_fail_open(
    g: ConversationGraph, tmp_path: Path, outside: Path
) -> None:
    pol = policy(tmp_path)
    start(g)
    tool_id = big_round(g, "a")
    (state_in(tmp_path) / "tool_results").mkdir(parents=True)
    (state_in(tmp_path) / "tool_results" / "s1").symlink_to(outside, target_is_directory=True)
    e = ContextEngine(g, pol, budget=100_000, state_dir=state_in(tmp_path))
    rendered = e.render()
    assert rendered.fits and tool_pair_problems(rendered.messages) == []
    [record] = [r for r in rendered.records if r.tier == "offload"]
    assert record.error and tool_id in record.error and "symlink" in record.error
    assert record.offloaded == []
    # The output stays inline, shortened by budget reduction instead.
    assert "output offloaded" not in str(rendered.messages[3]["content"])
    assert "budget_reduction" in [a.tier for a in rendered.actions]
    untouched(outside)
    assert e.render().records == []  # not retried every turn
    untouched(outside)


def test_a_symlinked_tool_results_folder_makes_offload_fail_open(
    g: ConversationGraph, tmp_path: Path, outside: Path
) -> None:
    pol = policy(tmp_path)
    start(g)
    big_round(g, "a")
    state_in(tmp_path).mkdir(parents=True)
    (state_in(tmp_path) / "tool_results").symlink_to(outside, target_is_directory=True)
    rendered = ContextEngine(g, pol, budget=100_000, state_dir=state_in(tmp_path)).render()
    [record] = [r for r in rendered.records if r.tier == "offload"]
    assert record.error and "symlink" in record.error
    untouched(outside)
    assert not (outside / "s1").exists()


def test_planted_files_in_the_session_folder_are_never_written_through(
    g: ConversationGraph, tmp_path: Path, outside: Path
) -> None:
    pol = policy(tmp_path)
    start(g)
    tool_id = big_round(g, "a")
    folder = state_in(tmp_path) / "tool_results" / "s1"
    folder.mkdir(parents=True)
    victim = outside / "authorized_keys"
    planted = [
        folder / f"{tool_id}.tmp",
        folder / f".{tool_id}.txt.tmp",
        folder / f".{tool_id}.txt.000000000000.tmp",
        folder / f".{tool_id}.txt.ffffffffffff.tmp",
        folder / f"{tool_id}.txt",  # the file itself: replaced, never followed
    ]
    for link in planted:
        link.symlink_to(victim)
    e = ContextEngine(g, pol, budget=100_000, state_dir=state_in(tmp_path))
    rendered = e.render()
    [record] = [r for r in rendered.records if r.tier == "offload"]
    assert record.error is None
    target = folder / f"{tool_id}.txt"
    assert not target.is_symlink() and target.read_text() == BIG
    name = f"tool_results/s1/{tool_id}.txt"
    assert record.offloaded == [{"node": tool_id, "path": name, "chars": len(BIG)}]
    for link in planted[:-1]:
        assert link.is_symlink()  # left alone
    untouched(outside)
    leftovers = [p for p in folder.iterdir() if p.suffix == ".tmp" and not p.is_symlink()]
    assert leftovers == []


def test_the_state_folder_itself_may_be_a_link(g: ConversationGraph, tmp_path: Path) -> None:
    real = tmp_path / "real-state"
    real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    pol = Policy(always=("offload",), offload_chars=10_000, offload_share=None)
    start(g)
    tool_id = big_round(g, "a")
    rendered = ContextEngine(g, pol, budget=100_000, state_dir=tmp_path / "link").render()
    assert record_problems(rendered) == []
    assert (real / "tool_results" / "s1" / f"{tool_id}.txt").read_text() == BIG
    assert len(list(read_jsonl(real / "records" / "s1.jsonl"))) == 1
    assert os.path.islink(tmp_path / "link")
