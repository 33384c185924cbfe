"""A store opened read-only (SQLite's ``mode=ro``, a read-only transaction on PostgreSQL)
reads everything, migrates nothing, and a write is one line saying it is read-only."""

from __future__ import annotations

import pytest

import graph
from graph import ConversationGraph, Migration, SQLStore, StoreError


def test_a_read_only_store(store_url: str) -> None:
    writer = ConversationGraph.open(store_url, "s")
    writer.append({"role": "user", "content": "hi"})
    writer.store.put_values("s", "ns", {"a": "1"})
    graph.dispose_engines()
    reader = SQLStore(store_url, read_only=True)
    applied: list[str] = []
    reader.migrate([Migration("test_never_applied", lambda _c: applied.append("ran"))])
    assert applied == []
    again = ConversationGraph(reader, "s")
    assert [n.payload.content for n in again.nodes()] == ["hi"]  # type: ignore[union-attr]
    assert reader.get_values("s", "ns") == {"a": "1"}
    assert [info.id for info in reader.sessions()] == ["s"]
    with pytest.raises(StoreError, match="is open read-only") as caught:
        again.append({"role": "user", "content": "more"})
    assert "\n" not in str(caught.value)
    with pytest.raises(StoreError, match="is open read-only"):
        reader.put_values("s", "ns", {"b": "2"})
    assert len(ConversationGraph(SQLStore(store_url, read_only=True), "s")) == 1
    graph.dispose_engines()
