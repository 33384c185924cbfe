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

from context import StateDirError
from graph import ConversationGraph
from openprogram import Session
from openprogram.cli import main
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


# -- hardlinks and a FIFO marker, through the command line and a Session --------------------

KEY = "OPENAI_API_KEY=sk-live-Q9x7-do-not-touch"


def _offloaded(db: Path) -> tuple[Session, str]:
    """A session in ``db``'s default state folder whose tool output (holding ``KEY``) was
    offloaded by a render."""
    s = Session(str(db), "s1", system="You deploy.", budget=8_000)
    call = {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}
    s.graph.append({"role": "user", "content": "deploy"})
    s.graph.append({"role": "assistant", "content": None, "tool_calls": [call]})
    tool = s.graph.append(
        {"role": "tool", "tool_call_id": "c1", "content": f"{KEY}\n" + "x" * 30_000}
    )
    s.graph.append({"role": "assistant", "content": "deployed"})
    s.engine.render()
    return s, tool.id


def _env(tmp_path: Path) -> Path:
    env = tmp_path / "project" / ".env"
    env.parent.mkdir()
    env.write_text(KEY + "\n")
    return env


def _link(env: Path, where: Path) -> None:
    where.parent.mkdir(parents=True, exist_ok=True)
    where.unlink(missing_ok=True)
    os.link(env, where)


def test_cli_scrub_never_writes_through_a_hardlink(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "op.db"
    s, tool_id = _offloaded(db)
    s.close()
    env = _env(tmp_path)
    state = tmp_path / "op.db.state"
    _link(env, state / "tool_results" / "s1" / f"{tool_id}.txt")
    _link(env, state / "records" / "s1.jsonl")
    code, out, err = run(capsys, "--db", str(db), "scrub", "s1", "--pattern", "sk-live-Q9x7")
    assert code == 1 and out == ""
    [line] = err.strip().splitlines()
    assert "has 3 links" in line and f"tool_results/s1/{tool_id}.txt" in line
    assert "records/s1.jsonl" in line
    assert env.read_text() == KEY + "\n" and os.stat(env).st_nlink == 3
    assert KEY not in json.dumps(ConversationGraph.open(db, session="s1").to_openai())


def test_a_session_render_never_appends_to_a_hardlinked_records_log(tmp_path: Path) -> None:
    db = tmp_path / "op.db"
    env = _env(tmp_path)
    _link(env, tmp_path / "op.db.state" / "records" / "s1.jsonl")
    s, _ = _offloaded(db)
    try:
        assert [r.tier for r in s.engine.records()] == ["offload"]  # kept in the database
        assert env.read_text() == KEY + "\n"
        again = s.engine.render()
        assert any("2 links" in str(a.error) for a in again.actions if a.tier == "records")
        assert env.read_text() == KEY + "\n"
    finally:
        s.close()


@pytest.mark.parametrize(
    "command",
    [["context", "s1"], ["records", "s1", "--log"], ["scrub", "s1", "--known"], ["gc"]],
    ids=["context", "records", "scrub", "gc"],
)
def test_a_fifo_marker_is_one_line_not_a_hang(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], never_hangs: None, command: list[str]
) -> None:
    url, _ = _db(tmp_path)
    state = tmp_path / "op.db.state"
    state.mkdir()
    os.mkfifo(state / ".openprogram-database")
    code, out, err = run(capsys, "--db", url, *command)
    assert code == 1 and out == ""
    [line] = err.strip().splitlines()
    assert f"{state / '.openprogram-database'} is not a regular file" in line
    with pytest.raises(StateDirError, match="is not a regular file"):
        Session(url, "s1")
