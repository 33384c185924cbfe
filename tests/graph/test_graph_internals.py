"""What only the graph's private modules show: a refresh racing a writer (staged inside
the SQL store's event stream), the redactor's hint table and each migration's frozen DDL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _graph_helpers import call, graph_state, stored_state

# internal: the SQL store's event stream, the redactor's hints and the frozen migrations
import graph._migrations
import graph._redact
import graph._sql
from graph import DEFAULT_PATTERNS, ConversationGraph, Redactor


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


def test_every_default_pattern_has_hints() -> None:
    """The redactor skips a default pattern only by its hints: one without would never run."""
    assert set(graph._redact._HINTS) == set(DEFAULT_PATTERNS)
    custom = Redactor({"openai-key": r"ZZ-[0-9]+"})  # a custom pattern under a default name
    assert custom.redact("id ZZ-42") == "id [REDACTED:openai-key]"


def test_a_migration_holds_its_own_ddl() -> None:
    # graph_0001 made the edges index by session that graph_0004 replaced: the first
    # migration still makes it (its DDL is frozen), so an old database upgrades as it did
    first = " ".join(graph._migrations._INITIAL)
    assert "ix_graph_edges_session ON graph_edges (session)" in first
    assert "ix_graph_edges_session_dst" not in first
    assert "DROP INDEX IF EXISTS ix_graph_edges_session" in graph._migrations._EDGE_TARGETS
