"""A refresh that races a writer must not skip what the writer committed meanwhile."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _graph_helpers import call, graph_state, stored_state

# internal: the race is staged inside the SQL store's event stream
import graph._sql
from graph import ConversationGraph


def test_a_commit_between_the_loads_queries_is_not_skipped(
    pg_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = ConversationGraph.open(pg_db_url, session="s")
    writer.append({"role": "user", "content": "go"})
    writer.append({"role": "assistant", "content": None, "tool_calls": [call("c1")]})
    reader = ConversationGraph.open(pg_db_url, session="s")
    fired: list[bool] = []
    events = graph._sql.streamed

    def commit_meanwhile(*args: Any) -> Iterator[Any]:
        # after the reader read the nodes and before it reads the events, another writer
        # commits a node and then an event (a later seq)
        if not fired:
            fired.append(True)
            writer.append({"role": "user", "content": "meanwhile"})
            writer.append({"role": "tool", "tool_call_id": "c1", "content": "done"})
        yield from events(*args)

    writer.append({"role": "user", "content": "news"})  # so the refresh has rows to read
    monkeypatch.setattr(graph._sql, "streamed", commit_meanwhile)
    reader.refresh()
    monkeypatch.undo()
    assert fired
    reader.refresh()
    assert reader.repairs == []
    assert graph_state(reader)["nodes"] == stored_state(pg_db_url, "s")["nodes"]
    assert reader.last_seq == writer.last_seq
