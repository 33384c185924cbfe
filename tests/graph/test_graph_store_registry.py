"""One store registry (issue 23, item 4): every caller opens stores through
``graph.open_store``, by URL scheme; the store is three small protocols."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import graph
from graph import (
    ConversationGraph,
    EventLog,
    Leases,
    MemoryStore,
    SideData,
    SQLStore,
    Store,
    StoreError,
    open_store,
    register_store,
    store_schemes,
)


def test_open_store_picks_the_factory_of_the_scheme(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert isinstance(open_store(":memory:"), MemoryStore)
    assert isinstance(open_store("memory:"), MemoryStore)
    by_path = open_store(tmp_path / "a.db")
    assert isinstance(by_path, SQLStore) and by_path.url == f"sqlite:///{tmp_path / 'a.db'}"
    assert isinstance(open_store(f"sqlite:///{tmp_path}/b.db"), SQLStore)
    mine = MemoryStore()
    assert open_store(mine) is mine
    monkeypatch.setenv("OPENPROGRAM_DB", str(tmp_path / "env.db"))
    assert open_store().url == f"sqlite:///{tmp_path / 'env.db'}"
    with pytest.raises(StoreError, match="no database at"):
        open_store(tmp_path / "missing.db", create=False)
    assert not (tmp_path / "missing.db").exists()
    with pytest.raises(StoreError, match=r"no store for mysql://"):
        open_store("mysql://localhost/x")


def test_a_registered_scheme_opens_everywhere_stores_are_opened(tmp_path: Path) -> None:
    made: list[tuple[Any, bool, bool]] = []

    def factory(target: Any, *, create: bool = True, read_only: bool = False) -> Store:
        made.append((target, create, read_only))
        return MemoryStore()

    register_store("test-scheme", factory)
    assert "test-scheme" in store_schemes() and "postgresql" in store_schemes()
    g = ConversationGraph.open("test-scheme://anything", "s1")
    g.append({"role": "user", "content": "hi"})
    assert isinstance(g.store, MemoryStore)
    from openprogram import Session

    with Session("test-scheme://other", budget=1_000) as session:
        assert isinstance(session.store, MemoryStore)
    assert [m[0] for m in made] == ["test-scheme://anything", "test-scheme://other"]


def test_a_store_is_an_event_log_side_data_and_leases() -> None:
    store: Store = MemoryStore()
    log: EventLog = store
    side: SideData = store
    leases: Leases = store
    side.put_values("s1", "ns", {"k": "v"})
    leases.put_lease("s1", "f1", "me", 1)
    assert log.sessions() == [] and side.get_values("s1", "ns") == {"k": "v"}
    assert set(dir(SideData)).isdisjoint({"commit", "load", "put_lease"})
    assert {"get_values", "append_log", "migrate_side"} <= set(dir(SideData))
    assert graph.SideMigration._fields == ("name", "apply")
