"""A PostgreSQL database's id names its state folder under ``$OPENPROGRAM_STATE_HOME``; whoever
can write the ``graph_database`` row (a shared server, a restored dump) must not make it a
path. An id that is not a UUID of the form we write is refused, in one line, before it
touches any path: ``gc`` and a session's writes leave every file outside STATE_HOME alone,
and ``adopt-state --rekey`` gives the database a proper UUID again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _faults import snapshot
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

import graph
from context import StateDirError
from graph import ConversationGraph
from openprogram import Session
from openprogram.cli import main

pytestmark = pytest.mark.postgres


def set_id(url: str, value: str) -> None:
    """What an attacker with write access to the row does."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            connection.execute(
                text("UPDATE graph_database SET value = :value WHERE key = 'id'"),
                {"value": value},
            )
    finally:
        engine.dispose()
    graph.dispose_engines()


@pytest.fixture
def victim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder outside STATE_HOME shaped like a state folder, with files ``gc`` would
    remove there (no session owns them)."""
    home = tmp_path / "home" / "registry"
    monkeypatch.setenv("OPENPROGRAM_STATE_HOME", str(home))
    folder = tmp_path / "victim"
    (folder / "tool_results" / "gone").mkdir(parents=True)
    (folder / "tool_results" / "gone" / "01X.txt").write_text("the user's own file\n")
    (folder / "records").mkdir()
    (folder / "records" / "gone.jsonl").write_text("{}\n")
    return folder


@pytest.mark.parametrize("planted", ["relative", "absolute"])
def test_a_database_id_that_is_a_path_is_refused(
    pg_db_url: str,
    tmp_path: Path,
    victim: Path,
    capsys: pytest.CaptureFixture[str],
    planted: str,
) -> None:
    g = ConversationGraph.open(pg_db_url, session="s1")
    g.append({"role": "user", "content": "hi"})
    g.close()
    value = "../../victim" if planted == "relative" else str(victim)
    set_id(pg_db_url, value)
    before = snapshot(tmp_path, skip=lambda p: p.name == "home")

    code = main(["--db", pg_db_url, "gc"])
    err = capsys.readouterr().err
    assert code == 1
    [line] = err.strip().splitlines()
    assert f"names itself {value!r}" in line and "not a database UUID" in line
    with pytest.raises(StateDirError, match="not a database UUID"):
        Session(pg_db_url, "s1")
    assert main(["--db", pg_db_url, "delete", "s1"]) == 1
    capsys.readouterr()
    assert snapshot(tmp_path, skip=lambda p: p.name == "home") == before
    assert not (tmp_path / "home").exists()  # nothing written anywhere

    # the way out the error names: a new UUID, and the database is usable again
    assert main(["--db", pg_db_url, "adopt-state", "--rekey", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["previous_database"] == value and done["folder"].startswith(str(tmp_path / "home"))
    assert main(["--db", pg_db_url, "gc"]) == 0
    assert snapshot(tmp_path, skip=lambda p: p.name == "home") == before
