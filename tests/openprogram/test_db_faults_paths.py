"""Copy and import with each database statement failing in turn (``_db_faults``): a failed
one leaves no session, no node and no meta behind, and the source untouched; once nothing
fails, the whole copy or import is there."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _faults import failing

import graph
from graph import ConversationGraph, GraphError, MemoryStore, SQLStore, Store, StoreError
from openprogram import TraceFormatError
from openprogram.importers import import_trace


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "memory":
        yield MemoryStore()
        return
    if request.param == "sqlite":
        yield SQLStore(tmp_path / "op.db")
    else:
        yield SQLStore(request.getfixturevalue("pg_db_url"))
    graph.dispose_engines()


def _state(store: Store) -> Any:
    return [
        (info.id, info.nodes, store.session_meta(info.id), len(store.load(info.id).records))
        for info in sorted(store.sessions())
    ]


def _each_statement_fails(
    store: Store, write: Callable[[], object], whole: Callable[[], bool]
) -> int:
    """Fail the write's 1st, 2nd, … statement: each failure leaves the store as before, or,
    when what failed is a read after the write committed, with the whole write (``whole``)."""
    before = _state(store)
    fail_at = 1
    while True:
        with failing(store, fail_at) as faults:
            try:
                write()
            except (StoreError, GraphError, TraceFormatError) as error:
                if not faults.failed:
                    raise
                assert "injected fault" in str(error)
                if _state(store) != before:
                    assert whole(), f"statement {fail_at} left a half write"
                    return fail_at
                fail_at += 1
                continue
        assert whole()
        return faults.seen


def _source(store: Store) -> ConversationGraph:
    g = ConversationGraph(store, "src")
    g.append({"role": "user", "content": "q"})
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    g.append({"role": "assistant", "content": None, "tool_calls": [call]})
    g.append({"role": "tool", "tool_call_id": "c1", "content": "a.py"})
    with g.function("job") as fn:
        g.append({"role": "assistant", "content": "inside"})
        fn.output = "done"
    return g


def test_copy(store: Store) -> None:
    source = _source(store)
    contents = [(m["role"], m.get("content")) for m in source.to_openai()]

    def whole() -> bool:
        copied = ConversationGraph(store, "copy")
        return [(m["role"], m.get("content")) for m in copied.to_openai()] == contents

    assert _each_statement_fails(store, lambda: source.copy_to(store, "copy"), whole) >= 1


def test_import(store: Store, tmp_path: Path) -> None:
    _source(store)
    trace = tmp_path / "chat.json"
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "assistant", "content": "one file"},
    ]
    trace.write_text(json.dumps(messages))

    def run() -> object:
        return import_trace(trace, ConversationGraph(store, "imported"))

    def whole() -> bool:
        roles = [m["role"] for m in ConversationGraph(store, "imported").to_openai()]
        meta = store.session_meta("imported")
        return roles == ["user", "assistant", "tool", "assistant"] and "imported_traces" in meta

    assert _each_statement_fails(store, run, whole) >= 2
