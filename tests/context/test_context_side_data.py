"""Context keeps what it stores through side data alone (issue 23, item 4): its storage
takes any ``graph.SideData``, and its one migration from before moves old tables through
graph's side-data API (``context_0003_side_tables``), writing no SQL of its own."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from context import ContextStorage
from graph import (
    ConversationGraph,
    LogEntry,
    SideMigration,
    SQLStore,
    applied_migrations,
    engine_for,
)


class DictSide:
    """Side data and nothing else: no sessions, no nodes, no leases."""

    url = "memory:"

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], dict[str, str]] = {}
        self.logs: dict[tuple[str, str], list[LogEntry]] = {}
        self.migrated: list[str] = []

    def database_id(self) -> str | None:
        return "00000000-0000-4000-8000-00000000d1c7"  # the protocol asks for a UUID

    @contextmanager
    def transaction(self) -> Iterator[None]:
        yield

    def close(self) -> None:
        pass

    def get_values(
        self, session: str, namespace: str, keys: Collection[str] | None = None
    ) -> dict[str, str]:
        found = self.values.get((session, namespace), {})
        return dict(found) if keys is None else {k: found[k] for k in keys if k in found}

    def put_values(self, session: str, namespace: str, values: Mapping[str, str]) -> None:
        self.values.setdefault((session, namespace), {}).update(values)

    def append_log(
        self, session: str, namespace: str, entries: Sequence[tuple[str, str]], seq: int
    ) -> None:
        log = self.logs.setdefault((session, namespace), [])
        known = {e.key for e in log}
        log.extend(LogEntry(k, seq, b) for k, b in entries if k not in known)

    def read_log(self, session: str, namespace: str) -> list[LogEntry]:
        return list(self.logs.get((session, namespace), []))

    def migrate_side(self, migrations: Sequence[SideMigration]) -> None:
        self.migrated.extend(m.name for m in migrations)


def test_context_storage_needs_only_side_data(tmp_path: Path) -> None:
    side = DictSide()
    storage = ContextStorage(side, "s1", tmp_path / "state")
    assert side.migrated == ["context_0003_side_tables"]
    storage.save_tokens("o200k_base", {"a": 3, "b": 5})
    assert storage.load_tokens("o200k_base", ["b"]) == {"b": 5}
    assert storage.configure({"budget": 8_000}) == 1
    assert [c["changes"] for c in storage.configurations()] == [{"budget": 8_000}]


def test_old_context_tables_move_into_side_data(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    url = f"sqlite:///{path}"
    g = ConversationGraph(SQLStore(url), "s1")
    g.append({"role": "user", "content": "hi"})
    with sqlite3.connect(path) as old:  # what context 0001/0002 made, with rows
        old.execute("CREATE TABLE context_records (session TEXT, id TEXT, seq INT, body TEXT)")
        old.execute(
            "CREATE TABLE context_token_cache (session TEXT, encoding TEXT, key TEXT, tokens INT)"
        )
        old.execute("INSERT INTO context_token_cache VALUES ('s1', 'o200k_base', 'k1', 42)")
        old.execute("INSERT INTO context_records VALUES ('s1', 'r2', 5, 'second')")
        old.execute("INSERT INTO context_records VALUES ('s1', 'r1', 3, 'first')")
    storage = ContextStorage(SQLStore(url), "s1", tmp_path / "state")
    assert "context_0003_side_tables" in applied_migrations(engine_for(SQLStore(url).url))
    assert storage.load_tokens("o200k_base") == {"k1": 42}
    moved = SQLStore(url).read_log("s1", "context.records")
    assert moved == [LogEntry("r1", 3, "first"), LogEntry("r2", 5, "second")]
    with sqlite3.connect(path) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    assert not {"context_records", "context_token_cache"} & tables
