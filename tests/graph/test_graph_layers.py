"""Layers are sequenced facts: made, nested, rolled back, read as of any seq, stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from graph import (
    ConversationGraph,
    InvalidMessage,
    LayerError,
    LayerNotFound,
    MemoryStore,
    NodeNotFound,
)


def _rounds(g: ConversationGraph, n: int) -> list[str]:
    return [g.append({"role": "user", "content": f"m{i}"}).id for i in range(n)]


def test_a_layer_is_an_event_and_changes_no_node(store_url: str) -> None:
    g = ConversationGraph.open(store_url, session="s")
    ids = _rounds(g, 4)
    nodes = g.nodes()
    info = g.add_layer("collapse", ids[:2], {"summary": "m0 m1"}, meta={"tokens": 3})
    assert info.active and info.kind == "collapse" and info.covers == tuple(ids[:2])
    assert info.layer.replacement == {"summary": "m0 m1"} and info.layer.meta == {"tokens": 3}
    assert g.nodes() == nodes
    assert g.events()[-1].type == "layer" and g.events()[-1].node_id == info.id
    reopened = ConversationGraph.open(store_url, session="s")
    assert reopened.layers() == g.layers() == [info]
    assert reopened.layer(info.id) == info


def test_rollback_cascades_to_layers_built_on_it(store_url: str) -> None:
    g = ConversationGraph.open(store_url, session="s")
    ids = _rounds(g, 6)
    a = g.add_layer("collapse", ids[0:2], "a")
    b = g.add_layer("collapse", ids[2:4], "b")
    outer = g.add_layer("compact", ids[0:5], "all")
    assert set(outer.builds_on) == {a.id, b.id}
    done = g.rollback_layer(b.id, reason="look again")
    assert [i.id for i in done] == [outer.id, b.id]
    assert all(not i.active and i.reason == "look again" for i in done)
    assert [i.id for i in g.layers(active=True)] == [a.id]
    with pytest.raises(LayerError, match="already rolled back"):
        g.rollback_layer(b.id)
    assert ConversationGraph.open(store_url, session="s").layers() == g.layers()


def test_as_of_seq_shows_the_layers_that_applied_then() -> None:
    g = ConversationGraph.memory()
    ids = _rounds(g, 3)
    layer = g.add_layer("collapse", ids[:2], "x")
    made = g.last_seq
    g.rollback_layer(layer.id)
    assert g.at(made).layers() == [g.at(made).layer(layer.id)]
    assert g.at(made).layer(layer.id).active
    assert not g.layer(layer.id).active
    assert g.at(made - 1).layers() == []


def test_bad_layers_are_refused_and_store_nothing() -> None:
    g = ConversationGraph.memory()
    ids = _rounds(g, 4)
    g.add_layer("collapse", ids[0:2], "a")
    seq = g.last_seq
    with pytest.raises(LayerError, match="only in part"):
        g.add_layer("collapse", ids[1:3], "overlaps")
    with pytest.raises(NodeNotFound):
        g.add_layer("collapse", ["nope"], "x")
    with pytest.raises(InvalidMessage):
        g.add_layer("collapse", [], "x")
    with pytest.raises(InvalidMessage):
        g.add_layer("", ids, "x")
    with pytest.raises(LayerNotFound):
        g.add_layer("collapse", ids, "x", builds_on=["missing"])
    with pytest.raises(LayerNotFound, match="no layer 'missing'"):
        g.rollback_layer("missing")
    assert g.last_seq == seq


def test_another_sessions_layer_is_named() -> None:
    store = MemoryStore()
    a = ConversationGraph(store, "a")
    b = ConversationGraph(store, "b")
    layer = a.add_layer("collapse", _rounds(a, 2), "x")
    _rounds(b, 1)
    with pytest.raises(LayerNotFound, match="belongs to session 'a'"):
        b.rollback_layer(layer.id)


def test_a_failed_batch_undoes_its_layers(tmp_path: Path) -> None:
    g = ConversationGraph.open(tmp_path / "l.db", session="s")
    ids = _rounds(g, 3)
    kept = g.add_layer("collapse", ids[:1], "kept")
    with pytest.raises(RuntimeError), g.batch():
        g.add_layer("collapse", ids[1:2], "lost")
        g.rollback_layer(kept.id)
        raise RuntimeError
    assert g.layers() == [kept] and kept.active
    assert ConversationGraph.open(tmp_path / "l.db", session="s").layers() == [kept]


def test_side_values_and_logs(store_url: str) -> None:
    g = ConversationGraph.open(store_url, session="s")
    other = ConversationGraph(g.store, "t")
    store = g.store
    store.put_values("s", "tokens", {"a": "1", "b": "2"})
    store.put_values("s", "tokens", {"a": "3"})
    store.put_values("t", "tokens", {"a": "9"})
    assert store.get_values("s", "tokens") == {"a": "3", "b": "2"}
    assert store.get_values("s", "other") == {}
    assert store.get_values("s", "tokens", ["b", "zz"]) == {"b": "2"}  # only those keys
    assert store.get_values("s", "tokens", []) == {}
    many = {f"k{i}": str(i) for i in range(1_200)}  # more than one IN list
    store.put_values("s", "many", many)
    assert store.get_values("s", "many", [*many, "missing"]) == many
    store.append_log("s", "records", [("r1", "one"), ("r2", "two")], seq=4)
    store.append_log("s", "records", [("r1", "again"), ("r3", "three")], seq=5)
    assert [(e.key, e.seq, e.body) for e in store.read_log("s", "records")] == [
        ("r1", 4, "one"),
        ("r2", 4, "two"),
        ("r3", 5, "three"),
    ]
    store.delete_session("s")
    assert store.get_values("s", "tokens") == {} and store.read_log("s", "records") == []
    assert store.get_values("t", "tokens") == {"a": "9"} and other.session == "t"


def test_memory_side_data() -> None:
    store = MemoryStore()
    store.ensure_session("s")
    store.put_values("s", "n", {"k": "v"})
    store.append_log("s", "log", [("a", "1")], seq=1)
    assert store.get_values("s", "n") == {"k": "v"} and store.read_log("s", "log")[0].body == "1"
    store.delete_session("s")
    assert store.get_values("s", "n") == {} and store.read_log("s", "log") == []


def test_a_reopened_layer_shares_its_nodes_id_strings(store_url: str) -> None:
    g = ConversationGraph.open(store_url, session="s")
    ids = [g.append({"role": "user", "content": str(i)}).id for i in range(3)]
    layer = g.add_layer("collapse", ids, "all three")
    again = ConversationGraph.open(store_url, session="s")
    covers = again.layer(layer.id).covers
    assert covers == tuple(ids)
    assert all(c is again.get(c).id for c in covers)  # one string per id in memory
