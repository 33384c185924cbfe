"""What makes large sessions cheap, checked by what reaches the database (never by time):
a refresh with nothing new is one small query, a refresh reads only the new nodes' edges,
and appends inside a batch are buffered without changing what any reader sees."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy
from _graph_helpers import call, graph_state

import graph
from graph import ConversationGraph, SQLStore


@pytest.fixture
def url(store_url: str) -> Iterator[str]:
    yield store_url
    graph.dispose_engines()


class Statements:
    """Every SQL statement an engine runs while counting (an SQLAlchemy event listener)."""

    def __init__(self, engine: sqlalchemy.Engine) -> None:
        self.engine = engine
        self.seen: list[str] = []
        self.counting = False
        sqlalchemy.event.listen(engine, "before_cursor_execute", self._record)

    def _record(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if self.counting:
            self.seen.append(" ".join(statement.split()))

    def __enter__(self) -> Statements:
        self.seen.clear()
        self.counting = True
        return self

    def __exit__(self, *_: object) -> None:
        self.counting = False

    def close(self) -> None:
        sqlalchemy.event.remove(self.engine, "before_cursor_execute", self._record)


def _rounds(g: ConversationGraph, count: int, prefix: str = "c") -> None:
    for i in range(count):
        g.append({"role": "user", "content": f"step {i}"})
        g.append({"role": "assistant", "content": None, "tool_calls": [call(f"{prefix}{i}")]})
        g.append({"role": "tool", "tool_call_id": f"{prefix}{i}", "content": f"out {i}"})


def test_refresh_with_nothing_new_is_one_small_query(url: str) -> None:
    g = ConversationGraph.open(url, session="s")
    with g.batch():
        _rounds(g, 50)
    assert isinstance(g.store, SQLStore)
    statements = Statements(g.store.engine)
    try:
        with statements:
            g.refresh()
        queries = [s for s in statements.seen if not s.upper().startswith("BEGIN")]
        assert len(queries) == 1  # the counter, the head and the scrub mark (its audit log)
        assert queries[0].startswith("SELECT next_seq, head, (SELECT max(position) FROM")
        assert ") FROM graph_sessions WHERE id = " in queries[0]
    finally:
        statements.close()


def test_refresh_reads_only_the_new_nodes_edges(url: str) -> None:
    g = ConversationGraph.open(url, session="s")
    with g.batch():
        _rounds(g, 30)
    other = ConversationGraph.open(url, session="s")
    other.append({"role": "user", "content": "from the other writer"})
    assert isinstance(g.store, SQLStore)
    statements = Statements(g.store.engine)
    try:
        with statements:
            g.refresh()
        edge_reads = [s for s in statements.seen if "graph_edges" in s]
        assert len(edge_reads) == 1
        assert "JOIN graph_edges" in edge_reads[0] and "seq >" in edge_reads[0]
    finally:
        statements.close()
    again = ConversationGraph.open(url, session="s")
    assert g.nodes() == again.nodes() and g.events() == again.events()
    assert g.state.edges == again.state.edges and g.last_seq == again.last_seq


def test_a_batch_sends_rows_in_bulk_not_per_append(url: str) -> None:
    g = ConversationGraph.open(url, session="s")
    assert isinstance(g.store, SQLStore)
    g.store.ensure_session("s")  # (a session's first write also creates its row)
    statements = Statements(g.store.engine)
    try:
        with statements, g.batch():
            _rounds(g, 100)
        inserts = [s for s in statements.seen if s.upper().startswith("INSERT")]
        updates = [s for s in statements.seen if s.upper().startswith("UPDATE")]
    finally:
        statements.close()
    assert len(inserts) <= 3  # nodes, edges, events: one executemany each
    assert len(updates) == 2  # the first reservation, and the counter set once at the end
    again = ConversationGraph.open(url, session="s")
    assert [n.seq for n in again.nodes()] == [n.seq for n in g.nodes()]
    assert graph_state(again) == graph_state(g)


def test_reads_inside_a_batch_see_the_buffered_appends(url: str) -> None:
    g = ConversationGraph.open(url, session="s")
    with g.batch():
        _rounds(g, 3)
        loaded = g.store.load("s")
        assert len(loaded.records) == 12  # 9 nodes and 3 result events
        assert loaded.head == g.head
        assert g.store.sessions()[0].nodes == 9
        g.store.update_session_meta("s", {"imported": True})
        _rounds(g, 1, prefix="d")
    again = ConversationGraph.open(url, session="s")
    assert len(again) == 12 and again.head == g.head
    assert again.store.session_meta("s") == {"imported": True}


def test_a_caught_inner_batch_keeps_the_outer_seqs_consecutive(url: str) -> None:
    g = ConversationGraph.open(url, session="s")
    with g.batch():
        _rounds(g, 2)
        with pytest.raises(RuntimeError), g.batch():
            _rounds(g, 2, prefix="inner")
            raise RuntimeError("undo the inner batch")
        _rounds(g, 2, prefix="after")
    again = ConversationGraph.open(url, session="s")
    seqs = [r.seq if isinstance(r, graph.Event) else r[0].seq for r in again.state.records]
    assert seqs == list(range(1, 17))
    assert graph_state(again) == graph_state(g)
    other = ConversationGraph.open(url, session="s")
    other.append({"role": "user", "content": "next"})
    assert other.last_seq == 17


def test_a_failing_row_fails_its_batch_and_leaves_nothing(url: str) -> None:
    g = ConversationGraph.open(url, session="s")
    g.append({"role": "user", "content": "kept"})
    node = g.nodes()[0]
    with pytest.raises(graph.StoreError), g.batch():
        g.append({"role": "user", "content": "lost"})
        g.store.commit("s", [node], [], node.id)  # the same id again: the flush fails
    assert len(g) == 1
    again = ConversationGraph.open(url, session="s")
    assert len(again) == 1 and again.last_seq == 1
    g.append({"role": "user", "content": "after"})
    assert [n.seq for n in ConversationGraph.open(url, session="s").nodes()] == [1, 2]


def test_migration_replaces_the_session_index_of_edges(url: str) -> None:
    engine = graph.engine_for(url)
    names = {i["name"] for i in sqlalchemy.inspect(engine).get_indexes("graph_edges")}
    assert "ix_graph_edges_session_dst" in names
    assert "ix_graph_edges_session" not in names
