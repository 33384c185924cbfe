"""The state folder belongs to its database: a UUID in the database, a marker in the folder,
a folder serving another database refused; beside a SQLite file, per host for PostgreSQL,
temporary for memory; prompts name files relative to it."""

from __future__ import annotations

from pathlib import Path

import pytest
from _context_helpers import policy, start, tool_round

from context import (
    ContextEngine,
    ForeignStateFolder,
    StateFolder,
    release_state_folder,
    state_folder,
)
from graph import ConversationGraph, MemoryStore, SQLStore

MARKER = ".openprogram-database"  # the marker file that claims a state folder (on disk)
BIG = "".join(f"row {i:05d} " + "v" * 50 + "\n" for i in range(250))  # 15,000 chars


def offloading(g: ConversationGraph) -> str:
    start(g)
    node = tool_round(g, [("Read", BIG)], prefix="c")
    g.append({"role": "assistant", "content": "read it"})
    return g.tools(node.id)[0].id


def test_every_database_has_its_own_uuid(store_url: str, tmp_path: Path) -> None:
    store = SQLStore(store_url)
    found = store.database_id()
    assert found and len(found) == 36
    assert SQLStore(store_url).database_id() == found  # stored, not made per open
    assert SQLStore(tmp_path / "other.db").database_id() not in (None, found)
    assert MemoryStore().database_id() != MemoryStore().database_id()


def test_a_sqlite_database_keeps_its_folder_beside_it(tmp_path: Path) -> None:
    g = ConversationGraph.open(tmp_path / "agent.db", session="s1")
    try:
        tool_id = offloading(g)
        engine = ContextEngine(g, policy(tmp_path), budget=100_000)
        engine.render()
        folder = tmp_path / "agent.db.state"
        assert engine.folder.path == folder
        assert (folder / "tool_results" / "s1" / f"{tool_id}.txt").read_text() == BIG
        assert (folder / MARKER).read_text().splitlines()[0] == g.store.database_id()
        assert (folder / "records" / "s1.jsonl").is_file()
    finally:
        g.close()


def test_a_folder_that_serves_another_database_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    one = ConversationGraph.open(tmp_path / "one.db", session="s1")
    two = ConversationGraph.open(tmp_path / "two.db", session="s1")
    try:
        offloading(one)
        offloading(two)
        ContextEngine(one, policy(tmp_path), budget=100_000, state_dir=shared).render()
        assert (shared / MARKER).read_text().splitlines()[0] == one.store.database_id()
        with pytest.raises(ForeignStateFolder, match=r"serves database .* not this one"):
            ContextEngine(two, policy(tmp_path), budget=100_000, state_dir=shared)
        before = sorted(p.relative_to(shared) for p in shared.rglob("*"))
        with pytest.raises(ForeignStateFolder):
            from context import delete_session

            delete_session(two.store, "s1", shared)
        assert sorted(p.relative_to(shared) for p in shared.rglob("*")) == before
        assert one.store.has_session("s1") and two.store.has_session("s1")
    finally:
        one.close()
        two.close()


def test_a_postgres_database_has_a_folder_per_host_by_its_uuid(
    pg_db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENPROGRAM_STATE_HOME", str(tmp_path / "registry"))
    g = ConversationGraph.open(pg_db_url, session="s1")
    try:
        tool_id = offloading(g)
        engine = ContextEngine(g, policy(tmp_path), budget=100_000)
        engine.render()
        folder = tmp_path / "registry" / str(g.store.database_id())
        assert engine.folder.path == folder
        assert (folder / "tool_results" / "s1" / f"{tool_id}.txt").read_text() == BIG
        assert (folder / MARKER).read_text().splitlines()[0] == g.store.database_id()
    finally:
        g.close()


def test_a_memory_store_writes_to_a_temporary_folder_removed_on_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    g = ConversationGraph.memory("s1")
    offloading(g)
    engine = ContextEngine(g, policy(tmp_path), budget=100_000)
    engine.render()
    folder = engine.folder.path
    assert engine.folder.temporary and (folder / "tool_results" / "s1").is_dir()
    assert list(tmp_path.iterdir()) == []  # nothing in the working folder
    assert state_folder(g.store).path == folder  # one folder per store
    release_state_folder(g.store)
    assert not folder.exists()


def test_prompts_name_an_offloaded_output_by_handle_not_by_file(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    tool_id = offloading(g)
    renders = [
        ContextEngine(g, policy(tmp_path), budget=100_000, state_dir=tmp_path / name).preview()
        for name in ("here", "there")
    ]
    assert renders[0].messages == renders[1].messages  # the same bytes for every reader
    sent = str(renders[0].messages)
    assert 'read_output("n' in sent and tool_id not in sent and "tool_results" not in sent
    assert str(tmp_path) not in sent


def test_reading_writes_no_marker_and_makes_no_folder(tmp_path: Path) -> None:
    g = ConversationGraph.open(tmp_path / "agent.db", session="s1")
    try:
        offloading(g)
        ContextEngine(g, policy(tmp_path), budget=100_000).preview()
        assert not (tmp_path / "agent.db.state").exists()
        found = state_folder(g.store)
        assert isinstance(found, StateFolder) and found.served() is None
    finally:
        g.close()


@pytest.mark.postgres
def test_a_cloned_postgres_database_gets_its_own_uuid_and_folder(
    pg_url: str, pg_db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy import make_url

    import graph
    from context import collect_garbage
    from tests import _postgres

    monkeypatch.setenv("OPENPROGRAM_STATE_HOME", str(tmp_path / "registry"))
    g = ConversationGraph.open(pg_db_url, session="s1")
    offloading(g)
    ContextEngine(g, policy(tmp_path), budget=100_000).render()
    original = g.store.database_id()
    folder = tmp_path / "registry" / str(original)
    files = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    g.close()
    graph.dispose_engines()  # a template may have no connection open
    name = f"{make_url(pg_db_url).database}_clone"
    _postgres._admin_execute(
        pg_url, f'CREATE DATABASE "{name}" TEMPLATE "{make_url(pg_db_url).database}"'
    )
    clone_url = _postgres.with_database(pg_url, name)
    try:
        reader = SQLStore(clone_url, read_only=True)
        derived = reader.database_id()  # a read-only reader cannot store it, and agrees
        clone = ConversationGraph.open(clone_url, session="s1")
        mine = clone.store.database_id()
        assert mine == derived and mine not in (None, original)
        assert SQLStore(clone_url).database_id() == mine  # stored by the first writer
        assert SQLStore(pg_db_url).database_id() == original  # the original keeps its own
        assert state_folder(clone.store).path == tmp_path / "registry" / str(mine)
        # the clone's sessions are gone from it: gc against it never touches the original's
        clone.store.delete_session("s1")
        collect_garbage(clone.store)
        assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == files
        clone.close()
    finally:
        graph.dispose_engines()
        _postgres.drop_database(pg_url, clone_url)
