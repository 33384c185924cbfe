"""Eight writer processes appending at once, to one session or to eight, on SQLite and
PostgreSQL: every acknowledged append is stored, seqs are 1..n once each per session, and
every session reopens with valid tool pairs on every writer's branch, and a reader that
refreshed while they wrote ends up with exactly what is stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _children import check_session, finish, start, wait_ready

from context import tool_pair_problems
from graph import ConversationGraph, ToolResult

WRITERS = 8
APPENDS = 150
"""Each writer's appends: rounds of a user message, a tool call and its result."""


def _writer_of(message: dict[str, Any]) -> str:
    """Which writer sent a message (its tags are ``w<k>-<round>``)."""
    tag = message.get("tool_call_id") or message.get("content") or message["tool_calls"][0]["id"]
    return str(tag).split("-", 1)[0]


@pytest.mark.parametrize(
    ("shared", "fresh"),
    [(True, False), (False, False), (True, True)],
    ids=["one-session", "eight-sessions", "one-new-database"],
)
def test_writer_processes_lose_nothing(
    store_url: str, tmp_path: Path, shared: bool, fresh: bool
) -> None:
    """``fresh``: the writers all open a database nobody has opened yet (its tables made by
    whichever migrates first) and create the session at once."""
    sessions = ["shared" if shared else f"own{k}" for k in range(WRITERS)]
    for session in dict.fromkeys(sessions) if not fresh else ():
        graph = ConversationGraph.open(store_url, session=session)
        graph.append({"role": "system", "content": "You are one of many."})
        graph.close()
    extra = [str(APPENDS), "fresh"] if fresh else [str(APPENDS)]
    children = [
        start("write", store_url, session, tmp_path, k, *extra)
        for k, session in enumerate(sessions)
    ]
    try:
        for child in children:
            wait_ready(child)
        for child in children:  # all at once, after every child has paid its start-up
            assert child.process.stdin is not None
            child.process.stdin.write("go\n")
            child.process.stdin.flush()
        reader = ConversationGraph.open(store_url, session=sessions[-1])
        while any(child.process.poll() is None for child in children):
            reader.refresh()  # a reader catching up while they write
        for child in children:
            stderr = finish(child)
            assert child.process.returncode == 0, stderr
    finally:
        for child in children:
            finish(child, kill=True)
    for session in dict.fromkeys(sessions):
        writers = [k for k, s in enumerate(sessions) if s == session]
        mine = [children[k] for k in writers]
        acked = [node for child in mine for node in child.acked("node")]
        assert all(len(child.acked("node")) == APPENDS for child in mine)
        graph = check_session(store_url, session, tmp_path, nodes=acked, budget=1_000_000)
        # a user node, an assistant and its tool node, and a result event per round (the
        # render in check_session may have added collapse layers)
        system = 0 if fresh else 1
        assert len(graph.nodes()) == system + len(mine) * APPENDS
        results = [e for e in graph.events() if isinstance(e.data, ToolResult)]
        assert len(results) == len(mine) * APPENDS // 3
        for writer, child in zip(writers, mine, strict=True):  # its chain ends in its rounds
            messages = graph.to_openai(head=child.acked("node")[-2])
            assert tool_pair_problems(messages) == []
            own = [_writer_of(m) for m in messages[-APPENDS:]]
            assert own == [f"w{writer}"] * APPENDS
            if not fresh:  # all opened the session before anyone appended: own branches
                assert len(messages) == system + APPENDS
        assert tool_pair_problems(graph.to_openai()) == []
        if session == reader.session:
            reader.refresh()
            assert reader.repairs == []
            assert reader.nodes() == graph.nodes() and reader.events() == graph.events()
        graph.close()
