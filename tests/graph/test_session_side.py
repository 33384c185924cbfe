"""``session_side`` without namespaces named carries every namespace a session holds, in
the memory store and in SQLite alike (what another package wrote is not left behind), and
``load_export`` writes it all back."""

from __future__ import annotations

from pathlib import Path

import pytest

from graph import (
    ConversationGraph,
    MemoryStore,
    SQLStore,
    Store,
    export_session,
    load_export,
    session_side,
)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_every_side_namespace_is_exported_and_loaded_back(tmp_path: Path, kind: str) -> None:
    store: Store = MemoryStore() if kind == "memory" else SQLStore(tmp_path / "a.db")
    graph = ConversationGraph(store, "s1")
    graph.append({"role": "user", "content": "hi"})
    store.put_values("s1", "someone.items", {"k": "v"})
    store.put_values("s1", "someone.else", {"x": "1"})
    store.append_log("s1", "someone.log", [("e1", "body")], 1)
    store.put_lease("s1", "f1", "me", 1)  # a lease is this process's, not the session's
    store.put_values("s2", "other.session", {"y": "2"})
    assert store.side_namespaces("s1") == (["someone.else", "someone.items"], ["someone.log"])
    side = session_side(store, "s1")
    assert side["values"] == {"someone.else": {"x": "1"}, "someone.items": {"k": "v"}}
    assert side["logs"] == {"someone.log": [["e1", 1, "body"]]}
    out = tmp_path / "s1.json"
    export_session(graph.state, out, head=graph.head, side=side)
    copy = SQLStore(tmp_path / "b.db")
    load_export(out, copy)
    assert copy.side_namespaces("s1") == store.side_namespaces("s1")
    assert copy.get_values("s1", "someone.items") == {"k": "v"}
    assert copy.read_log("s1", "someone.log")[0].body == "body"
    store.close()
    copy.close()
