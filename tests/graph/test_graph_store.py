"""Stores: reopening, where the database lives, migrations, several writers, sessions."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy
from _graph_helpers import call, check_tool_pairs, graph_state

import graph
from graph import ConversationGraph, MemoryStore, SQLStore, StoreError


@pytest.fixture
def url(store_url: str) -> Iterator[str]:
    yield store_url
    graph.dispose_engines()


@pytest.fixture
def fresh_engines() -> Iterator[None]:
    graph.dispose_engines()
    yield
    graph.dispose_engines()


def _unregister(name: str) -> None:
    """Drop a test migration again so later tests' databases do not get it."""
    registry = graph._migrations._REGISTRY
    registry[:] = [m for m in registry if m.name != name]


def _populate(g: ConversationGraph) -> None:
    g.append({"role": "system", "content": "s"}, meta={"k": [1, 2]})
    u = g.append({"role": "user", "content": [{"type": "text", "text": "hi"}]})
    g.append({"role": "assistant", "content": None, "tool_calls": [call("a"), call("b", "x", {})]})
    g.append({"role": "tool", "tool_call_id": "b", "content": "B", "is_error": True})
    with g.function("outer", input={"n": 1}, expose="full") as outer:
        g.append({"role": "assistant", "content": "o", "thinking": "hm"})
        with pytest.raises(ValueError), g.function("inner", expose="llm"):
            g.append({"role": "assistant", "content": "i"})
            raise ValueError("inner broke")
        outer.output = ["result", 1]
    g.append({"role": "tool", "tool_call_id": "a", "content": "A"})
    g.fork(u.id)
    g.append({"role": "assistant", "content": "branch"})


def test_reopen_restores_the_identical_graph(url: str) -> None:
    g = ConversationGraph.open(url, session="s1")
    _populate(g)
    expected = graph_state(g)
    check_tool_pairs(expected["openai"])
    g.close()
    graph.dispose_engines()  # nothing cached: read it back through new connections

    again = ConversationGraph.open(url, session="s1")
    assert graph_state(again) == expected
    assert again.branches() == g.branches()
    assert again.to_openai(head=g.branches()[0]) == g.to_openai(head=g.branches()[0])
    assert again.store.url == g.store.url
    # and it continues where it stopped
    nxt = again.append({"role": "user", "content": "continue"})
    assert nxt.seq == expected["last_seq"] + 1
    assert again.predecessor(nxt.id) == again.get(expected["head"])
    again.close()


def test_reopen_inside_a_finished_function_keeps_the_frame(url: str) -> None:
    g = ConversationGraph.open(url, session="s2")
    with g.function("f") as fn:
        inner = g.append({"role": "assistant", "content": "x"})
    g.fork(inner.id)
    again = ConversationGraph.open(url, session="s2")
    assert (again.head, again.frame) == (inner.id, fn.id)


def test_open_with_a_plain_path(tmp_path: Path, fresh_engines: None) -> None:
    path = tmp_path / "sub" / "dir" / "conv.db"
    g = ConversationGraph.open(path, session="p")
    g.append({"role": "user", "content": "x"})
    assert path.is_file()
    assert g.store.url == f"sqlite:///{path.resolve()}"
    again = ConversationGraph.open(str(path), session="p")
    assert again.to_openai() == [{"role": "user", "content": "x"}]


def test_openprogram_db_env_var(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_engines: None
) -> None:
    target = tmp_path / "env.db"
    monkeypatch.setenv("OPENPROGRAM_DB", str(target))
    monkeypatch.chdir(tmp_path)
    g = ConversationGraph.open(session="e")
    g.append({"role": "user", "content": "x"})
    assert target.is_file()
    assert not (tmp_path / ".openprogram").exists()
    assert [s.id for s in SQLStore().sessions()] == ["e"]


def test_default_path_under_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_engines: None
) -> None:
    monkeypatch.delenv("OPENPROGRAM_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    g = ConversationGraph.open()
    g.append({"role": "user", "content": "x"})
    default = tmp_path / ".openprogram" / "openprogram.db"
    assert default.is_file()
    assert g.store.url == f"sqlite:///{default.resolve()}"
    assert graph.is_safe_id(g.session) and len(g.session) == 26


def test_postgres_scheme_is_normalized(pg_db_url: str, fresh_engines: None) -> None:
    plain = "postgresql://" + pg_db_url.split("://", 1)[1]
    g = ConversationGraph.open(plain, session="pg")
    assert g.store.url.startswith("postgresql+psycopg://")
    g.append({"role": "user", "content": "x"})
    graph.dispose_engines()


def test_migrations_on_an_empty_database(url: str) -> None:
    engine = sqlalchemy.create_engine(url)
    try:
        assert graph.applied_migrations(engine) == []
    finally:
        engine.dispose()
    assert graph.registered_migrations()[0] == "graph_0001_initial"
    cached = graph.engine_for(url)
    applied = graph.applied_migrations(cached)
    assert sorted(applied) == sorted(graph.registered_migrations())
    assert applied.count("graph_0001_initial") == 1
    tables = set(sqlalchemy.inspect(cached).get_table_names())
    assert {
        "graph_sessions",
        "graph_nodes",
        "graph_edges",
        "graph_events",
        "graph_migrations",
    } <= tables

    # reopening (new engine, same database) applies nothing again
    graph.dispose_engines()
    ConversationGraph.open(url, session="m").append({"role": "user", "content": "x"})
    assert graph.applied_migrations(graph.engine_for(url)) == applied


def test_custom_migration_applies_on_next_open(url: str) -> None:
    ConversationGraph.open(url, session="m")  # migrated with what is registered now
    name = f"test_{uuid.uuid4().hex[:12]}"
    table = f"t_{name}"
    calls: list[str] = []

    def create(connection: sqlalchemy.Connection) -> None:
        calls.append(name)
        connection.execute(sqlalchemy.text(f"CREATE TABLE {table} (x INTEGER)"))

    graph.register_migration(name, create)
    try:
        graph.register_migration(name, create)  # re-registering is a no-op
        assert graph.registered_migrations().count(name) == 1
        assert name == graph.registered_migrations()[-1]
        assert name not in graph.applied_migrations(graph.engine_for(url))

        graph.dispose_engines()
        ConversationGraph.open(url, session="m")
        engine = graph.engine_for(url)
        assert graph.applied_migrations(engine)[-1] == name
        assert table in sqlalchemy.inspect(engine).get_table_names()
        graph.dispose_engines()
        ConversationGraph.open(url, session="m")
        assert calls == [name]
    finally:
        _unregister(name)


def test_failing_migration_raises_migration_error(url: str) -> None:
    ConversationGraph.open(url, session="m")
    name = f"test_broken_{uuid.uuid4().hex[:12]}"

    def broken(connection: sqlalchemy.Connection) -> None:
        connection.execute(sqlalchemy.text("CREATE TABLE graph_nodes (x INTEGER)"))

    graph.register_migration(name, broken)
    try:
        graph.dispose_engines()
        with pytest.raises(graph.MigrationError, match=name):
            ConversationGraph.open(url, session="m")
    finally:
        graph._migrations._REGISTRY[:] = [m for m in graph._migrations._REGISTRY if m.name != name]
    assert isinstance(graph.MigrationError("x"), StoreError)


def test_two_writers_on_one_session(url: str) -> None:
    a = ConversationGraph.open(url, session="shared")
    b = ConversationGraph.open(url, session="shared")
    seqs = []
    for i in range(4):
        seqs.append(a.append({"role": "user", "content": f"a{i}"}).seq)
        seqs.append(b.append({"role": "user", "content": f"b{i}"}).seq)
    assert seqs == list(range(1, 9))

    # each writer has caught up with the other's records on its way
    expected = [f"{w}{i}" for i in range(4) for w in "ab"][:-1]
    assert [n.payload.content for n in a.nodes()] == expected  # type: ignore[union-attr]
    a.refresh()
    b.refresh()
    assert graph_state(a)["nodes"] == graph_state(b)["nodes"]
    assert a.state.edges == b.state.edges
    assert a.last_seq == b.last_seq == 8
    c = ConversationGraph.open(url, session="shared")
    assert c.nodes() == a.nodes()


def test_refresh_sees_the_other_writers_nodes(url: str) -> None:
    a = ConversationGraph.open(url, session="r")
    b = ConversationGraph.open(url, session="r")
    a.append({"role": "assistant", "content": None, "tool_calls": [call("t")]})
    assert len(b) == 0
    b.refresh()
    assert [n.kind for n in b.nodes()] == ["dialogue", "tool"]
    # b can answer a's call: an unknown call id makes it look again first
    a.append({"role": "user", "content": "meanwhile"})
    b.append({"role": "tool", "tool_call_id": "t", "content": "from b"})
    a.refresh()
    assert a.tools(a.nodes()[0].id)[0].result is not None
    assert a.events() == b.events()


def test_sessions_listing_and_delete(url: str) -> None:
    one = ConversationGraph.open(url, session="one")
    one.append({"role": "user", "content": "x"})
    one.append({"role": "assistant", "content": None, "tool_calls": [call("t")]})
    two = ConversationGraph.open(url, session="two")
    assert [s.id for s in two.store.sessions()] == ["one"]  # opening alone writes nothing
    assert not two.store.ensure_session("two")
    listed = {s.id: s for s in two.store.sessions()}
    assert set(listed) == {"one", "two"}
    assert (listed["one"].nodes, listed["two"].nodes) == (3, 0)
    assert isinstance(listed["one"], graph.SessionInfo) and listed["one"].created.tzinfo is not None
    assert two.store.session_of(one.nodes()[0].id) == "one"

    two.store.delete_session("one")
    assert [s.id for s in two.store.sessions()] == ["two"]
    assert two.store.session_of(one.nodes()[0].id) is None
    reopened = ConversationGraph.open(url, session="one")
    assert len(reopened) == 0 and reopened.events() == []
    assert not reopened.store.ensure_session("three")
    assert reopened.store.ensure_session("three")


def test_batch_is_one_transaction(url: str) -> None:
    g = ConversationGraph.open(url, session="batch")
    with g.batch():
        for i in range(5):
            g.append({"role": "user", "content": str(i)})
    assert [n.seq for n in ConversationGraph.open(url, session="batch").nodes()] == [1, 2, 3, 4, 5]
    with pytest.raises(RuntimeError), g.batch():
        g.append({"role": "user", "content": "rolled back"})
        raise RuntimeError("abort")
    assert len(ConversationGraph.open(url, session="batch")) == 5


def _session_meta_round_trip(store: graph.Store) -> None:
    assert store.session_meta("m") == {}
    assert store.update_session_meta("m", {"a": {"x": 1}, "b": [1, "two"]}) == {
        "a": {"x": 1},
        "b": [1, "two"],
    }
    assert store.update_session_meta("m", {"a": None, "c": 3.5}) == {
        "a": None,
        "b": [1, "two"],
        "c": 3.5,
    }
    assert store.session_meta("m") == {"a": None, "b": [1, "two"], "c": 3.5}
    assert store.session_meta("other") == {}
    assert store.session_meta("missing") == {} and not store.has_session("missing")
    # a write creates the session (in its own transaction), as an append does
    assert store.update_session_meta("missing", {"a": 1}) == {"a": 1}
    assert store.has_session("missing") and store.session_meta("missing") == {"a": 1}


def test_session_meta_is_read_and_updated_per_session(url: str) -> None:
    g = ConversationGraph.open(url, session="m")
    ConversationGraph.open(url, session="other")
    _session_meta_round_trip(g.store)
    graph.dispose_engines()
    assert SQLStore(url).session_meta("m") == {"a": None, "b": [1, "two"], "c": 3.5}


def test_session_meta_rolls_back_with_its_transaction(url: str) -> None:
    g = ConversationGraph.open(url, session="t")
    with pytest.raises(RuntimeError), g.batch():
        g.append({"role": "user", "content": "x"})
        g.store.update_session_meta("t", {"done": True})
        raise RuntimeError("abort")
    assert g.store.session_meta("t") == {}
    with g.batch():
        g.store.update_session_meta("t", {"done": True})
    assert SQLStore(url).session_meta("t") == {"done": True}


def test_memory_store_session_meta() -> None:
    store = MemoryStore()
    ConversationGraph(store, "m")
    ConversationGraph(store, "other")
    _session_meta_round_trip(store)
    with pytest.raises(graph.InvalidMessage):
        store.update_session_meta("m", 3)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError), store.transaction():
        store.update_session_meta("m", {"c": "rolled back"})
        raise RuntimeError("abort")
    assert store.session_meta("m")["c"] == 3.5


def test_memory_store_sessions() -> None:
    store = MemoryStore()
    a = ConversationGraph(store, "a")
    b = ConversationGraph(store, "b")
    a.append({"role": "user", "content": "x"})
    assert store.session_of(a.nodes()[0].id) == "a"
    with pytest.raises(graph.CrossSessionError):
        b.fork(a.nodes()[0].id)
    assert sorted((s.id, s.nodes) for s in store.sessions()) == [("a", 1)]  # b wrote nothing
    b.append({"role": "user", "content": "y"})
    store.delete_session("a")
    assert [s.id for s in store.sessions()] == ["b"]


def test_unsafe_session_id_is_rejected() -> None:
    with pytest.raises(graph.InvalidMessage) as error:
        ConversationGraph.memory("../etc")
    assert error.value.field == "session"


def test_unreachable_database_is_a_store_error(tmp_path: Path, fresh_engines: None) -> None:
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(StoreError, match="cannot open database"):
        ConversationGraph.open(tmp_path / "dir.db", session="x")
