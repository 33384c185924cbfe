"""``ConversationGraph`` and ``SQLStore`` are built from objects they hold, not from mixins:
their class hierarchy is only their real bases, and their public surface is what it was
when the function, layer and branch writers and the side tables were mixed in (captured
before they became objects)."""

from __future__ import annotations

from pathlib import Path

from graph import (
    ConversationGraph,
    EventLog,
    GraphReader,
    GraphView,
    Leases,
    SideData,
    SQLStore,
    Store,
)

GRAPH_SURFACE = [
    "add_layer",
    "append",
    "at",
    "batch",
    "branch",
    "branches",
    "branches_by_name",
    "caller",
    "checkout",
    "children",
    "clone",
    "close",
    "copy_to",
    "create_branch",
    "default_head",
    "events",
    "finish_function",
    "fork",
    "frame",
    "function",
    "get",
    "head",
    "head_of",
    "last_seq",
    "layer",
    "layers",
    "lock",
    "memory",
    "nodes",
    "open",
    "predecessor",
    "refresh",
    "restart",
    "rollback_layer",
    "session",
    "start_function",
    "state",
    "to_networkx",
    "to_openai",
    "tools",
    "visible",
]

STORE_SURFACE = [
    "add_write_guard",
    "append_log",
    "close",
    "commit",
    "database_id",
    "delete_session",
    "drop_lease",
    "ensure_session",
    "get_values",
    "has_session",
    "leases",
    "load",
    "lock_session",
    "migrate",
    "migrate_side",
    "put_lease",
    "put_values",
    "read_log",
    "rekey",
    "remove_write_guard",
    "renew_lease",
    "session_meta",
    "session_of",
    "sessions",
    "side_namespaces",
    "transaction",
    "update_session_meta",
    "url",
]


def _public(value: object) -> list[str]:
    return sorted(name for name in dir(value) if not name.startswith("_"))


def test_the_graph_is_a_reader_with_no_mixin() -> None:
    """Its one base is the read face it shares with ``GraphView``."""
    assert ConversationGraph.__mro__ == (ConversationGraph, GraphReader, object)
    assert GraphView.__mro__ == (GraphView, GraphReader, object)
    owners = {
        name: next(c for c in ConversationGraph.__mro__ if name in vars(c))
        for name in GRAPH_SURFACE
    }
    assert set(owners.values()) == {ConversationGraph, GraphReader}


def test_the_sql_store_is_a_store_with_no_mixin() -> None:
    """Its one base is ``Store`` (the event log, side data and leases protocols)."""
    assert SQLStore.__mro__[:2] == (SQLStore, Store)
    assert SQLStore.__mro__[1:] == Store.__mro__
    assert {EventLog, SideData, Leases} <= set(Store.__mro__)


def test_the_graphs_public_surface_is_unchanged(tmp_path: Path) -> None:
    assert _public(ConversationGraph) == GRAPH_SURFACE
    g = ConversationGraph.open(tmp_path / "g.db", "s1")
    assert _public(g) == sorted([*GRAPH_SURFACE, "redactor", "repairs", "store"])
    g.close()


def test_the_sql_stores_public_surface_is_unchanged(tmp_path: Path) -> None:
    assert _public(SQLStore) == STORE_SURFACE
    assert _public(SQLStore(tmp_path / "s.db")) == sorted([*STORE_SURFACE, "engine", "read_only"])


def test_the_writers_share_one_position(tmp_path: Path) -> None:
    """A head moved by one writer (a function, a branch, a layer) is the head the graph and
    every other writer see, on SQLite as in memory."""
    g = ConversationGraph.open(tmp_path / "g.db", "s1")
    first = g.append({"role": "user", "content": "plan"}).id
    with g.function("research") as fn:
        inner = g.append({"role": "assistant", "content": "looked"}).id
        assert (g.frame, g.head, g.head_of()) == (fn.id, inner, inner)
        assert fn.graph is g
    assert (g.frame, g.head) == (None, fn.id)
    g.create_branch("try-b", at=first)
    assert g.checkout("try-b") == first and g.branch == "try-b"
    other = g.append({"role": "assistant", "content": "plan B"}).id
    layer = g.add_layer("collapse", [first, other], "plan, then B")
    assert layer.covers == (first, other) and g.head == other
    assert g.branches_by_name() == {"main": fn.id, "try-b": other}
    assert [m["content"] for m in g.to_openai()] == ["plan", "plan B"]
    g.close()
