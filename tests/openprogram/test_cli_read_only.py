"""Reading commands open the database read-only (SQLite's ``mode=ro``): they migrate
nothing and write nothing, so they work on a database they may not write, and a table the
database predates is one line that says so."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from context import ContextEngine, Policy
from graph import ConversationGraph, SQLStore, StoreError, dispose_engines
from openprogram.cli import main

READERS = [
    ["sessions"],
    ["show", "s"],
    ["context", "s"],
    ["context", "s", "--json"],
    ["records", "s"],
    ["collapses", "s"],
    ["check", "s"],
]


def _imported(tmp_path: Path) -> Path:
    """A database made by ``import``: it has the graph's migrations and no others."""
    db = tmp_path / "op.db"
    trace = tmp_path / "chat.json"
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "assistant", "content": "one file"},
    ]
    trace.write_text(json.dumps(messages))
    assert main(["--db", str(db), "import", str(trace), "--session", "s"]) == 0
    dispose_engines()  # the last connection checkpoints the WAL into the file
    return db


def _migrations(db: Path) -> list[str]:
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [row[0] for row in connection.execute("SELECT name FROM graph_migrations")]
    finally:
        connection.close()


def test_readers_write_nothing(tmp_path: Path) -> None:
    db = _imported(tmp_path)
    before = db.read_bytes()
    applied = _migrations(db)
    assert not any(name.startswith("context") for name in applied)
    for argv in READERS:
        assert main(["--db", str(db), *argv]) == 0, argv
    out = tmp_path / "export.json"
    assert main(["--db", str(db), "export", "s", str(out), "--format", "openai"]) == 0
    dispose_engines()
    assert _migrations(db) == applied
    assert db.read_bytes() == before


def test_expand_reads_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = _imported(tmp_path)
    graph = ConversationGraph.open(db, "s")
    first = graph.append({"role": "user", "content": "and the tests?"})
    last = graph.append({"role": "assistant", "content": "one file"})
    graph.append({"role": "user", "content": "thanks"})
    engine = ContextEngine(graph, Policy(), budget=100_000, state_dir=tmp_path / "state")
    layer = engine.collapse(first.id, last.id)
    engine.close()
    dispose_engines()
    before = db.read_bytes()
    capsys.readouterr()
    assert main(["--db", str(db), "expand", layer.id]) == 0
    assert "one file" in capsys.readouterr().out
    dispose_engines()
    assert db.read_bytes() == before


def test_a_read_only_store_refuses_to_write(tmp_path: Path) -> None:
    db = _imported(tmp_path)
    store = SQLStore(db, read_only=True)
    assert [info.id for info in store.sessions()] == ["s"]
    with pytest.raises(StoreError, match="is open read-only") as caught:
        store.update_session_meta("s", {"x": 1})
    assert "\n" not in str(caught.value)
    with pytest.raises(StoreError, match="no database at"):
        SQLStore(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()
    dispose_engines()


def test_a_database_that_predates_a_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _imported(tmp_path)
    connection = sqlite3.connect(db)
    connection.execute("DROP TABLE graph_logs")
    connection.execute("DROP TABLE graph_values")
    connection.execute("DELETE FROM graph_migrations WHERE name = 'graph_0002_side_tables'")
    connection.commit()
    connection.close()
    assert main(["--db", str(db), "show", "s"]) == 0
    capsys.readouterr()
    assert main(["--db", str(db), "records", "s"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert err == (
        f"error: this database (sqlite:///{db}) predates the graph_logs table (made by "
        "migration graph_0002_side_tables); open it once for writing to migrate it"
    )
    dispose_engines()
