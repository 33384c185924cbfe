"""A refresh that races a writer must not skip what the writer committed meanwhile."""

from __future__ import annotations

from typing import Any

from _graph_helpers import call, graph_state, stored_state
from sqlalchemy import event

from graph import ConversationGraph


def test_a_commit_between_the_loads_queries_is_not_skipped(pg_db_url: str) -> None:
    writer = ConversationGraph.open(pg_db_url, session="s")
    writer.append({"role": "user", "content": "go"})
    writer.append({"role": "assistant", "content": None, "tool_calls": [call("c1")]})
    reader = ConversationGraph.open(pg_db_url, session="s")
    fired: list[str] = []

    def commit_meanwhile(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        # after the reader read the nodes and before it reads the events, another writer
        # commits a node and then an event (a later seq)
        if "FROM graph_events" in statement and not fired:
            fired.append(statement)
            writer.append({"role": "user", "content": "meanwhile"})
            writer.append({"role": "tool", "tool_call_id": "c1", "content": "done"})

    writer.append({"role": "user", "content": "news"})  # so the refresh has rows to read
    engine = reader.store.engine  # type: ignore[attr-defined]
    event.listen(engine, "before_cursor_execute", commit_meanwhile)
    try:
        reader.refresh()
    finally:
        event.remove(engine, "before_cursor_execute", commit_meanwhile)
    assert fired
    reader.refresh()
    assert reader.repairs == []
    assert graph_state(reader)["nodes"] == stored_state(pg_db_url, "s")["nodes"]
    assert reader.last_seq == writer.last_seq
