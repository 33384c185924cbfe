"""A copied SQLite file is another database: it is refused its original's state folder
(``cp agent.db experiment.db`` then ``--state-dir agent.db.state``), a moved one keeps it,
and ``adopt-state`` makes a copy its own database (``--rekey``) or hands it the folder,
recorded. Everything through the command line, as a careless user would type it."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from _faults import snapshot

import graph
from context import CopiedDatabase
from openprogram import Session
from openprogram.cli import main

MARKER = ".openprogram-database"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def offloaded(db: Path) -> str:
    """Session ``s`` in ``db`` with a tool output offloaded to its state folder; the node id."""
    s = Session(str(db), "s", system="You read.", budget=8_000)
    call = {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
    s.graph.append({"role": "user", "content": "read"})
    s.graph.append({"role": "assistant", "content": None, "tool_calls": [call]})
    tool = s.graph.append({"role": "tool", "tool_call_id": "c1", "content": "row\n" * 8_000})
    s.graph.append({"role": "assistant", "content": "read it"})
    s.engine.render()
    s.close()
    graph.dispose_engines()  # the last connection checkpoints: the file alone holds it all
    return tool.id


@pytest.fixture
def short(tmp_path: Path) -> Path:
    """A short folder: the refusal is one line, cut past 300 characters (a long path)."""
    return Path(tempfile.mkdtemp(prefix="cp", dir=tmp_path.parent))


@pytest.fixture
def agent(short: Path) -> tuple[Path, Path, str]:
    """``agent.db`` with an offloaded output and a records log in ``agent.db.state``."""
    db = short / "agent.db"
    tool_id = offloaded(db)
    state = short / "agent.db.state"
    assert (state / "records" / "s.jsonl").is_file()
    assert (state / "tool_results" / "s" / f"{tool_id}.txt").is_file()
    return db, state, tool_id


def sessions(capsys: pytest.CaptureFixture[str], db: Path) -> list[str]:
    code, out, _ = run(capsys, "--db", str(db), "sessions", "--json")
    assert code == 0
    return [row["id"] for row in json.loads(out)]


@pytest.mark.parametrize("command", [["delete", "s"], ["gc"]], ids=["delete", "gc"])
@pytest.mark.parametrize("marker", ["today", "older"])
def test_a_copy_is_refused_its_originals_state_folder(
    agent: tuple[Path, Path, str],
    short: Path,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    marker: str,
) -> None:
    db, state, _ = agent
    if marker == "older":  # a marker written before it named the file: the UUID alone
        uuid = (state / MARKER).read_text().splitlines()[0]
        (state / MARKER).write_text(uuid + "\n")
    before = snapshot(state)
    copy = short / "experiment.db"
    shutil.copy(db, copy)
    code, out, err = run(capsys, "--db", str(copy), "--state-dir", str(state), *command)
    assert code == 1 and out == ""
    [line] = err.strip().splitlines()
    assert f"{copy} is a copy of {db}" in line and "adopt-state --rekey" in line
    assert snapshot(state) == before  # the original's records and offloads are all there
    assert sessions(capsys, copy) == ["s"]  # and nothing was deleted from the copy either
    with pytest.raises(CopiedDatabase):
        Session(str(copy), "s", state_dir=state)
    assert snapshot(state) == before


def test_a_copy_has_its_own_folder_by_default(
    agent: tuple[Path, Path, str], short: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, state, _ = agent
    before = snapshot(state)
    copy = short / "experiment.db"
    shutil.copy(db, copy)
    assert run(capsys, "--db", str(copy), "delete", "s")[0] == 0
    assert snapshot(state) == before and sessions(capsys, db) == ["s"]


def test_a_moved_database_keeps_its_folder_and_the_move_is_recorded(
    agent: tuple[Path, Path, str], short: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, state, tool_id = agent
    moved = short / "renamed.db"
    db.rename(moved)
    assert run(capsys, "--db", str(moved), "--state-dir", str(state), "context", "s")[0] == 0
    assert json.loads((state / MARKER).read_text().splitlines()[1])["path"] == str(db)
    assert run(capsys, "--db", str(moved), "--state-dir", str(state), "gc")[0] == 0
    owner = json.loads((state / MARKER).read_text().splitlines()[1])
    assert owner["path"] == str(moved.resolve())
    history = [json.loads(line) for line in (state / f"{MARKER}.history").read_text().splitlines()]
    assert [(h["event"], h["from"], h["to"]) for h in history] == [
        ("moved", str(db.resolve()), str(moved.resolve()))
    ]  # reading wrote nothing; the first writer (gc) recorded the move
    assert run(capsys, "--db", str(moved), "--state-dir", str(state), "delete", "s")[0] == 0
    assert not (state / "tool_results" / "s" / f"{tool_id}.txt").exists()


def test_a_project_copied_whole_owns_its_copy_of_the_folder(
    agent: tuple[Path, Path, str], short: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, state, _ = agent
    before = snapshot(state)
    elsewhere = short / "project2"
    elsewhere.mkdir()
    shutil.copy(db, elsewhere / "agent.db")
    shutil.copytree(state, elsewhere / "agent.db.state")
    assert run(capsys, "--db", str(elsewhere / "agent.db"), "delete", "s")[0] == 0
    assert not (elsewhere / "agent.db.state" / "records" / "s.jsonl").exists()
    assert snapshot(state) == before
    # and it is recorded as this file's folder now; the original still owns its own
    owner = json.loads((elsewhere / "agent.db.state" / MARKER).read_text().splitlines()[1])
    assert owner["path"] == str((elsewhere / "agent.db").resolve())
    assert run(capsys, "--db", str(db), "gc")[0] == 0 and snapshot(state) == before


def test_adopt_state_rekey_makes_the_copy_its_own_database(
    agent: tuple[Path, Path, str], short: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, state, _ = agent
    before = snapshot(state)
    copy = short / "experiment.db"
    shutil.copy(db, copy)
    base = ["--db", str(copy), "--state-dir", str(state)]
    code, out, err = run(capsys, *base, "adopt-state", "--rekey", "--json")
    assert code == 0, err
    done = json.loads(out)
    old = (state / MARKER).read_text().splitlines()[0]
    assert done["previous_database"] == old and done["database"] != old
    assert done["folder"] == str(short / "experiment.db.state")
    assert done["left"] == str(state)  # the original's folder stays the original's
    assert snapshot(state) == before
    code, _, err = run(capsys, *base, "delete", "s")
    assert code == 1 and "serves database" in err and snapshot(state) == before
    assert run(capsys, "--db", str(copy), "delete", "s")[0] == 0
    assert snapshot(state) == before and sessions(capsys, db) == ["s"]


def test_adopt_state_takes_a_folder_over_and_records_it(
    agent: tuple[Path, Path, str], short: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, state, tool_id = agent
    copy = short / "experiment.db"
    shutil.copy(db, copy)
    base = ["--db", str(copy), "--state-dir", str(state)]
    code, out, err = run(capsys, *base, "adopt-state")
    assert code == 0, err
    assert f"{state} now serves {copy.resolve()}" in out
    history = [json.loads(line) for line in (state / f"{MARKER}.history").read_text().splitlines()]
    assert [(h["event"], h["from"], h["to"]) for h in history] == [
        ("taken over", str(db.resolve()), str(copy.resolve()))
    ]
    # the original is now the one refused: the folder went to the copy, on purpose
    code, _, err = run(capsys, "--db", str(db), "gc")
    assert code == 1 and f"{db} is a copy of {copy.resolve()}" in err
    assert run(capsys, *base, "delete", "s")[0] == 0
    assert not (state / "tool_results" / "s" / f"{tool_id}.txt").exists()


def test_a_marker_from_before_is_brought_forward_by_its_database(
    agent: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, state, _ = agent
    uuid = (state / MARKER).read_text().splitlines()[0]
    (state / MARKER).write_text(uuid + "\n")  # as today's main writes it
    assert run(capsys, "--db", str(db), "context", "s")[0] == 0
    assert (state / MARKER).read_text() == uuid + "\n"  # reading writes nothing
    assert run(capsys, "--db", str(db), "gc")[0] == 0  # the first writer names the file
    first, second = (state / MARKER).read_text().splitlines()
    assert first == uuid and json.loads(second)["path"] == str(db.resolve())
    assert not (state / f"{MARKER}.history").exists()  # nothing changed hands


def test_an_original_whose_folder_was_taken_over_is_told_to_name_one(
    agent: tuple[Path, Path, str], short: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, state, _ = agent
    copy = short / "experiment.db"
    shutil.copy(db, copy)
    assert run(capsys, "--db", str(copy), "--state-dir", str(state), "adopt-state")[0] == 0
    before = snapshot(state)
    code, out, err = run(capsys, "--db", str(db), "adopt-state", "--rekey")
    assert code == 0, err
    assert f"its default folder {state} serves another file and is left to it" in out
    assert snapshot(state) == before
    assert run(capsys, "--db", str(db), "--state-dir", str(short / "mine"), "gc")[0] == 0
    assert run(capsys, "--db", str(copy), "--state-dir", str(state), "gc")[0] == 0
