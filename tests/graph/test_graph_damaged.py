"""A damaged database: a row that does not decode, or a page SQLite cannot read, is a
``StoreError`` that names the session, seq and table (never a raw driver or decoder error),
and ``repair=True`` loads everything readable and says what it left out."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlalchemy

from graph import ConversationGraph, SQLStore, StoreError, dispose_engines


def _session(db: Path | str, count: int = 6, size: int = 10) -> list[str]:
    graph = ConversationGraph.open(db, "s")
    ids = [
        graph.append({"role": "user", "content": f"row-{i:04d}-" + "x" * size}).id
        for i in range(count)
    ]
    graph.close()
    dispose_engines()
    return ids


def _sql(db: Path | str, statement: str) -> None:
    """Damage the database behind the store's back (any store: SQLite or PostgreSQL)."""
    if isinstance(db, Path):
        connection = sqlite3.connect(db)
        connection.execute(statement)
        connection.commit()
        connection.close()
        return
    engine = sqlalchemy.create_engine(SQLStore(db).url)
    with engine.begin() as connection:
        connection.exec_driver_sql(statement)
    engine.dispose()


@pytest.mark.parametrize(
    ("statement", "table", "seq"),
    [
        ('UPDATE graph_nodes SET payload = \'{"role": "us\' WHERE seq = 3', "graph_nodes", 3),
        ("UPDATE graph_nodes SET meta = '[1, 2' WHERE seq = 4", "graph_nodes", 4),
        ("UPDATE graph_nodes SET payload = '\"text\"' WHERE seq = 2", "graph_nodes", 2),
    ],
)
def test_a_row_that_does_not_decode(store_url: str, statement: str, table: str, seq: int) -> None:
    db = store_url
    ids = _session(db)
    _sql(db, statement)
    with pytest.raises(StoreError) as caught:
        ConversationGraph.open(db, "s")
    message = str(caught.value)
    assert f"session 's', seq {seq}, table {table}" in message and "repair=True" in message
    repaired = ConversationGraph.open(db, "s", repair=True)
    assert [n.id for n in repaired.nodes()] == ids[: seq - 1] + ids[seq:]
    note, *dropped = repaired.repairs
    assert note.startswith(f"skipped session 's', seq {seq}, table {table}: node {ids[seq - 1]}")
    assert all(f"from missing node {ids[seq - 1]}" in d for d in dropped)  # the chain edge
    repaired.refresh()  # reading again does not repeat the notes
    assert len(repaired.repairs) == 1 + len(dropped)
    dispose_engines()


def test_an_event_that_does_not_decode(store_url: str) -> None:
    db = store_url
    graph = ConversationGraph.open(db, "s")
    graph.append({"role": "user", "content": "q"})
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    graph.append({"role": "assistant", "content": None, "tool_calls": [call]})
    graph.append({"role": "tool", "tool_call_id": "c1", "content": "files"})
    dispose_engines()
    _sql(db, 'UPDATE graph_events SET data = \'{"type": "result", \' WHERE seq = 4')
    with pytest.raises(StoreError, match=r"session 's', seq 4, table graph_events"):
        ConversationGraph.open(db, "s")
    repaired = ConversationGraph.open(db, "s", repair=True)
    assert len(repaired) == 3 and repaired.nodes()[2].result is None
    assert "seq 4, table graph_events" in repaired.repairs[0]
    dispose_engines()


def test_session_meta_that_does_not_decode(store_url: str) -> None:
    db = store_url
    _session(db)
    _sql(db, "UPDATE graph_sessions SET meta = '{\"a\": ' WHERE id = 's'")
    with pytest.raises(StoreError, match=r"session 's', table graph_sessions"):
        SQLStore(db).session_meta("s")
    dispose_engines()


def _corrupt_page_holding(db: Path, marker: bytes) -> None:
    """Overwrite the header of the page that holds ``marker`` (a table leaf of
    graph_nodes): SQLite then fails to read that page, and only that page."""
    data = bytearray(db.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    offset = data.index(marker)
    start = (offset // page_size) * page_size
    data[start : start + 8] = b"\xff" * 8
    db.write_bytes(bytes(data))


def test_a_page_the_database_cannot_read(tmp_path: Path) -> None:
    db = tmp_path / "op.db"
    ids = _session(db, count=40, size=1500)
    assert not (tmp_path / "op.db-wal").exists() or (tmp_path / "op.db-wal").stat().st_size == 0
    _corrupt_page_holding(db, b"row-0020-")
    with pytest.raises(StoreError) as caught:
        ConversationGraph.open(db, "s")
    message = str(caught.value)
    assert "table graph_nodes of session 's'" in message and "repair=True" in message
    repaired = ConversationGraph.open(db, "s", repair=True)
    kept = [n.id for n in repaired.nodes()]
    lost = [i for i in ids if i not in kept]
    assert ids[20] in lost and 1 <= len(lost) <= 3
    assert kept == [i for i in ids if i not in lost]
    skipped = [note for note in repaired.repairs if note.startswith("skipped")]
    assert len(skipped) == len(lost)
    assert all("the database cannot read it" in note for note in skipped)
    dispose_engines()
