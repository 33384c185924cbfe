"""``openprogram delete``, ``gc`` and ``records --log`` and ``Session.delete`` against a
hostile state folder: links are never followed, FIFOs never waited on, and what is refused
is said in one line, never a traceback."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from _faults import snapshot

from graph import ConversationGraph
from openprogram import Session
from openprogram._cli import main
from openprogram.testing import TestModel

SECRET = b"ssh-ed25519 AAAA... do not delete\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    (folder / "s1" / "sub").mkdir(parents=True)
    (folder / "s1" / "sub" / "x.txt").write_bytes(SECRET)
    (folder / "gone").mkdir()
    (folder / "authorized_keys").write_bytes(SECRET)
    (folder / "s1.jsonl").write_bytes(SECRET)
    (folder / "gone.jsonl").write_bytes(SECRET)
    return folder


class Hung(BaseException):
    """Raised by the alarm: no ``except OSError`` on the way may swallow it."""


@pytest.fixture
def never_hangs() -> Iterator[None]:
    """A FIFO opened for reading would block forever: fail the test instead."""

    def hung(*_: object) -> None:
        raise Hung("blocked on the state folder")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _db(tmp_path: Path) -> tuple[str, Path]:
    url = f"sqlite:///{tmp_path}/op.db"
    graph = ConversationGraph.open(url, session="s1")
    graph.append({"role": "user", "content": "hi"})
    graph.close()
    return url, tmp_path / "state"


def test_gc_with_symlinked_top_folders_exits_cleanly(
    tmp_path: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, state = _db(tmp_path)
    state.mkdir()
    (state / "tool_results").symlink_to(outside, target_is_directory=True)
    (state / "records").symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    base = ["--db", url, "--state-dir", str(state)]
    code, out, err = run(capsys, *base, "gc", "--json")
    assert code == 0
    assert json.loads(out) == {
        "removed": [],
        "refused": [
            f"{state / 'tool_results'} is a symlink; not followed, nothing under it removed",
            f"{state / 'records'} is a symlink; not followed, nothing under it removed",
        ],
    }
    assert err.count("refused:") == 2 and "Error" not in err
    assert snapshot(outside) == before


def test_gc_dry_run_json_equals_the_real_runs(
    tmp_path: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, state = _db(tmp_path)
    (state / "tool_results" / "s1").mkdir(parents=True)
    (state / "tool_results" / "s1" / "keys").symlink_to(outside / "authorized_keys")
    (state / "tool_results" / "gone" / "sub").mkdir(parents=True)
    (state / "tool_results" / "gone" / "sub" / "01X.txt").write_text("x")
    (state / "tool_results" / "gone" / "escape").symlink_to(outside, target_is_directory=True)
    (state / "records").mkdir()
    (state / "records" / "gone.jsonl").write_text("")
    before = snapshot(outside)
    base = ["--db", url, "--state-dir", str(state)]
    code, out, _ = run(capsys, *base, "gc", "--dry-run", "--json")
    would = json.loads(out)
    assert code == 0 and len(would["would_remove"]) == 6 and would["refused"] == []
    code, out, _ = run(capsys, *base, "gc", "--json")
    assert code == 0 and json.loads(out) == {"removed": would["would_remove"], "refused": []}
    code, out, _ = run(capsys, *base, "gc")
    assert code == 0 and "nothing to remove" in out
    assert snapshot(outside) == before


def test_cli_delete_never_follows_symlinked_folders(
    tmp_path: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, state = _db(tmp_path)
    state.mkdir()
    (state / "tool_results").symlink_to(outside, target_is_directory=True)
    (state / "records").symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    code, out, err = run(capsys, "--db", url, "--state-dir", str(state), "delete", "s1")
    assert code == 0 and "deleted session s1" in out
    assert err.count("warning:") == 2 and "tool_results is a symlink" in err
    assert snapshot(outside) == before


def test_session_delete_never_follows_symlinked_folders(tmp_path: Path, outside: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    session = Session(str(tmp_path / "op.db"), "s1", model=TestModel(["ok"]), state_dir=state)
    (state / "tool_results").symlink_to(outside, target_is_directory=True)
    (state / "records").symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    with pytest.warns(RuntimeWarning, match="is a symlink; not followed") as caught:
        session.delete()
    assert len(caught) == 2 and "records is a symlink" in str(caught[1].message)
    assert snapshot(outside) == before


def test_records_log_on_a_fifo_is_refused_not_waited_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], never_hangs: None
) -> None:
    url, state = _db(tmp_path)
    (state / "records").mkdir(parents=True)
    os.mkfifo(state / "records" / "s1.jsonl")
    base = ["--db", url, "--state-dir", str(state)]
    code, _, err = run(capsys, *base, "records", "s1", "--log")
    assert code == 1
    assert f"{state / 'records' / 's1.jsonl'} is not a regular file" in err
