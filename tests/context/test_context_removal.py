"""Removal from the state folder (``delete``, ``gc``) never follows a link out of it, says
what it refused, and a dry run lists exactly what a real run removes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from _faults import snapshot

from context import Removal, collect_garbage, delete_session
from graph import ConversationGraph, MemoryStore, Store

MAX_DEPTH = 64  # how deep a removal walks; deeper trees are left and named
SECRET = b"ssh-ed25519 AAAA... do not delete\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the state folder shaped like what delete and gc look for."""
    folder = tmp_path / "outside"
    (folder / "s1" / "sub").mkdir(parents=True)
    (folder / "s1" / "01NODE.txt").write_bytes(SECRET)
    (folder / "s1" / "sub" / "deep.txt").write_bytes(SECRET)
    (folder / "gone" / "sub").mkdir(parents=True)
    (folder / "authorized_keys").write_bytes(SECRET)
    (folder / "s1.jsonl").write_bytes(SECRET)
    (folder / "gone.jsonl").write_bytes(SECRET)
    return folder


def live_store(*sessions: str) -> tuple[Store, dict[str, str]]:
    """A memory store with these sessions, each holding one node; node id by session."""
    store = MemoryStore()
    nodes = {}
    for name in sessions:
        graph = ConversationGraph(store, name)
        nodes[name] = graph.append({"role": "user", "content": "hi"}).id
    return store, nodes


def test_delete_never_follows_symlinked_tool_results_or_records(
    tmp_path: Path, outside: Path
) -> None:
    before = snapshot(outside)
    state = tmp_path / "state"
    state.mkdir()
    (state / "tool_results").symlink_to(outside, target_is_directory=True)
    (state / "records").symlink_to(outside, target_is_directory=True)
    store, _ = live_store("s1")
    with pytest.warns(RuntimeWarning) as caught:
        report = delete_session(store, "s1", state)
    assert snapshot(outside) == before
    assert report.removed == []
    assert report.refused == [
        f"{state / 'tool_results'} is a symlink; not followed, nothing under it removed",
        f"{state / 'records'} is a symlink; not followed, nothing under it removed",
    ]
    assert [str(w.message) for w in caught] == [
        f"deleting session 's1': {line}" for line in report.refused
    ]
    assert (state / "tool_results").is_symlink() and (state / "records").is_symlink()
    assert "s1" not in [s.id for s in store.sessions()]


def test_delete_unlinks_links_it_owns_and_never_what_they_point_to(
    tmp_path: Path, outside: Path
) -> None:
    before = snapshot(outside)
    state = tmp_path / "state"
    (state / "tool_results" / "s1").mkdir(parents=True)
    (state / "records").mkdir()
    folder = state / "tool_results" / "s1"
    (folder / "link-to-folder").symlink_to(outside / "s1", target_is_directory=True)
    (folder / "link-to-file.txt").symlink_to(outside / "authorized_keys")
    (folder / "real").mkdir()
    (folder / "real" / "inner-link").symlink_to(outside, target_is_directory=True)
    (folder / "real" / "01A.txt").write_text("ours")
    os.mkfifo(folder / "fifo")
    (state / "records" / "s1.jsonl").symlink_to(outside / "s1.jsonl")
    store, _ = live_store("s1")
    report = delete_session(store, "s1", state)
    assert snapshot(outside) == before
    assert report.refused == []
    assert sorted(str(p.relative_to(state)) for p in report.removed) == [
        "records/s1.jsonl",
        "tool_results/s1",
        "tool_results/s1/fifo",
        "tool_results/s1/link-to-file.txt",
        "tool_results/s1/link-to-folder",
        "tool_results/s1/real",
        "tool_results/s1/real/01A.txt",
        "tool_results/s1/real/inner-link",
    ]
    assert sorted(p.name for p in state.iterdir()) == ["records", "tool_results"]
    assert list((state / "tool_results").iterdir()) == []


def test_delete_of_a_symlinked_session_folder_removes_only_the_link(
    tmp_path: Path, outside: Path
) -> None:
    before = snapshot(outside)
    state = tmp_path / "state"
    (state / "tool_results").mkdir(parents=True)
    (state / "tool_results" / "s1").symlink_to(outside / "s1", target_is_directory=True)
    store, _ = live_store("s1")
    report = delete_session(store, "s1", state)
    assert report.removed == [state / "tool_results" / "s1"] and report.refused == []
    assert snapshot(outside) == before


def test_removal_leaves_too_deep_trees_and_says_so(tmp_path: Path) -> None:
    state = tmp_path / "state"
    deep = state / "tool_results" / "s1"
    for level in range(MAX_DEPTH + 3):
        deep = deep / f"d{level}"
    deep.mkdir(parents=True)
    store, _ = live_store("s1")
    with pytest.warns(RuntimeWarning, match=f"nested over {MAX_DEPTH} deep; left in place"):
        report = delete_session(store, "s1", state_dir=state)
    [refusal] = report.refused
    assert f"nested over {MAX_DEPTH} deep; left in place" in refusal
    assert (state / "tool_results" / "s1").exists()


def test_a_missing_state_folder_removes_nothing(tmp_path: Path) -> None:
    store, _ = live_store("s1")
    assert delete_session(store, "s1", state_dir=tmp_path / "nowhere") == Removal()
    assert not (tmp_path / "nowhere").exists()


# -- gc -------------------------------------------------------------------------------------


def messy_state(state: Path, outside: Path, node: str) -> None:
    """Orphans, links, FIFOs, stale and fresh temporary files, and a live session's files."""
    live = state / "tool_results" / "s1"
    live.mkdir(parents=True)
    (live / f"{node}.txt").write_text("kept: a live node's output")
    (live / "01NOTANODE.txt").write_text("stale")
    (live / "link.txt").symlink_to(outside / "authorized_keys")
    (live / f"{node}.txt.lnk").symlink_to(outside, target_is_directory=True)
    (live / "planted").mkdir()
    (live / "planted" / "x").write_text("x")
    os.mkfifo(live / "pipe")
    fresh = live / f".{node}.txt.ab12.tmp"
    fresh.write_text("a write in progress")
    old = live / f".{node}.txt.cd34.tmp"
    old.write_text("a killed write")
    then = time.time() - 3_600
    os.utime(old, (then, then))
    orphan = state / "tool_results" / "gone"
    (orphan / "deep").mkdir(parents=True)
    (orphan / "deep" / "01X.txt").write_text("x")
    (orphan / "escape").symlink_to(outside, target_is_directory=True)
    (state / "tool_results" / "also-gone").symlink_to(outside / "gone", target_is_directory=True)
    (state / "tool_results" / "not a safe id").mkdir()
    (state / "records").mkdir()
    (state / "records" / "s1.jsonl").write_text("")
    (state / "records" / "gone.jsonl").write_text("")
    (state / "records" / "linked.jsonl").symlink_to(outside / "gone.jsonl")
    (state / "records" / "notes.txt").write_text("not ours to judge")


def test_gc_dry_run_lists_exactly_what_a_real_run_removes(tmp_path: Path, outside: Path) -> None:
    before = snapshot(outside)
    state = tmp_path / "state"
    store, nodes = live_store("s1")
    messy_state(state, outside, nodes["s1"])
    would = collect_garbage(store, state, dry_run=True)
    assert would.refused == []
    assert snapshot(state / "tool_results" / "gone")  # nothing removed yet
    did = collect_garbage(store, state)
    assert did == would
    assert sorted(str(p.relative_to(state)) for p in did.removed) == sorted(
        [
            "records/gone.jsonl",
            "records/linked.jsonl",
            "tool_results/also-gone",
            "tool_results/gone",
            "tool_results/gone/deep",
            "tool_results/gone/deep/01X.txt",
            "tool_results/gone/escape",
            "tool_results/not a safe id",
            f"tool_results/s1/.{nodes['s1']}.txt.cd34.tmp",
            "tool_results/s1/01NOTANODE.txt",
            f"tool_results/s1/{nodes['s1']}.txt.lnk",
            "tool_results/s1/link.txt",
            "tool_results/s1/pipe",
            "tool_results/s1/planted",
            "tool_results/s1/planted/x",
        ]
    )
    assert sorted(p.name for p in (state / "tool_results" / "s1").iterdir()) == sorted(
        [f"{nodes['s1']}.txt", f".{nodes['s1']}.txt.ab12.tmp"]
    )
    assert sorted(p.name for p in (state / "records").iterdir()) == ["notes.txt", "s1.jsonl"]
    assert collect_garbage(store, state, dry_run=True) == Removal()
    assert snapshot(outside) == before


def test_gc_never_follows_a_live_sessions_symlinked_folder(tmp_path: Path, outside: Path) -> None:
    before = snapshot(outside)
    state = tmp_path / "state"
    (state / "tool_results").mkdir(parents=True)
    (state / "tool_results" / "s1").symlink_to(outside, target_is_directory=True)
    store, _ = live_store("s1")
    report = collect_garbage(store, state)
    assert report.removed == [state / "tool_results" / "s1"] and report.refused == []
    assert snapshot(outside) == before


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real"])
def test_gc_refuses_symlinked_top_folders(tmp_path: Path, outside: Path, dry_run: bool) -> None:
    before = snapshot(outside)
    state = tmp_path / "state"
    state.mkdir()
    (state / "tool_results").symlink_to(outside, target_is_directory=True)
    (state / "records").symlink_to(outside, target_is_directory=True)
    store, _ = live_store("s1")
    report = collect_garbage(store, state, dry_run=dry_run)
    assert report.removed == []
    assert report.refused == [
        f"{state / 'tool_results'} is a symlink; not followed, nothing under it removed",
        f"{state / 'records'} is a symlink; not followed, nothing under it removed",
    ]
    assert snapshot(outside) == before


def test_gc_refuses_a_file_where_a_folder_belongs(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "tool_results").write_text("not a folder")
    store, _ = live_store("s1")
    report = collect_garbage(store, state)
    assert report.refused == [
        f"{state / 'tool_results'} is not a folder; not followed, nothing under it removed"
    ]
    assert (state / "tool_results").read_text() == "not a folder"
