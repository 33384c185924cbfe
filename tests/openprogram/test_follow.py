"""Following a growing transcript: new records only, idempotent, through a torn last line,
a rewrite and a rotation; over MCP, the server's sessions grow while it runs."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from graph import ConversationGraph, SQLStore
from openprogram._follow import TraceFollower
from openprogram.importers import import_trace

ROOT = Path(__file__).resolve().parents[2]
T0 = "2026-01-01T10:00:00.000Z"


def _record(kind: str, uuid: str, parent: str | None, message: dict[str, Any]) -> dict[str, Any]:
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "sessionId": "follow-1",
        "type": kind,
        "uuid": uuid,
        "timestamp": T0,
        "message": message,
    }


def _turns(first: int, last: int) -> list[dict[str, Any]]:
    """Rounds ``first``..``last``: a user prompt, an assistant tool call, its result."""
    records = []
    for n in range(first, last + 1):
        parent = f"r{n - 1}" if n > 1 else None
        records.append(_record("user", f"u{n}", parent, {"role": "user", "content": f"step {n}"}))
        call = {
            "type": "tool_use",
            "id": f"t{n}",
            "name": "Bash",
            "input": {"command": f"make t{n}"},
        }
        assistant = {
            "model": "claude-test",
            "id": f"m{n}",
            "type": "message",
            "role": "assistant",
            "content": [call],
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }
        records.append(_record("assistant", f"a{n}", f"u{n}", assistant))
        result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": f"ok {n}"}
        records.append(_record("user", f"r{n}", f"a{n}", {"role": "user", "content": [result]}))
    return records


def _write(path: Path, records: list[dict[str, Any]], mode: str = "w") -> None:
    with path.open(mode) as out:
        out.writelines(json.dumps(r) + "\n" for r in records)


def _nodes_of(path: Path) -> int:
    graph = ConversationGraph.memory()
    import_trace(path, graph)
    return len(graph)


def test_polls_import_only_what_is_new(tmp_path: Path) -> None:
    trace = tmp_path / "session.jsonl"
    _write(trace, _turns(1, 3))
    store = SQLStore(tmp_path / "f.db")
    errors: list[str] = []
    follower = TraceFollower(store, trace, on_error=errors.append)
    first = follower.poll()
    assert first is not None and not first.already_imported
    session = follower.session
    assert session is not None
    assert follower.poll() is None  # unchanged: not even parsed
    _write(trace, _turns(4, 5), "a")
    with trace.open("a") as out:
        out.write('{"parentUuid": "r5", "type": "user", "uuid": "u6", "mess')  # torn
    assert follower.poll() is None and follower.error is not None and errors
    _write(trace, _turns(1, 6))  # the agent finishes its line (and writes another round)
    grown = follower.poll()
    assert grown is not None and grown.held > 0 and follower.error is None
    assert len(ConversationGraph(store, session)) == _nodes_of(trace)
    # a rotation: the file renamed away and a new one written with the same beginning
    trace.rename(tmp_path / "session.jsonl.1")
    assert follower.poll() is None  # between the rename and the new file
    _write(trace, _turns(1, 8))
    follower.poll()
    assert follower.session == session
    assert len(ConversationGraph(store, session)) == _nodes_of(trace)
    assert [info.id for info in store.sessions()] == [session]
    # a file that now holds another conversation goes to a session of its own
    _write(trace, [_record("user", "x1", None, {"role": "user", "content": "another task"})])
    follower.poll()
    assert follower.session != session and len(store.sessions()) == 2


def test_the_mcp_server_follows_a_growing_transcript(tmp_path: Path) -> None:
    trace = tmp_path / "session.jsonl"
    _write(trace, _turns(1, 2))
    db = tmp_path / "follow.db"
    code = "import sys; from openprogram._cli import run; sys.argv[0] = 'openprogram'; run()"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", code, "mcp", "--db", str(db), "--follow", str(trace)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=str(tmp_path),
    )

    async def sessions(client: Client) -> list[dict[str, Any]]:
        result = await client.call_tool("list_sessions", {})
        return list(json.loads(result.content[0].text))  # type: ignore[union-attr]

    async def body() -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
        async with Client(params, raise_exceptions=True) as client:
            before = await sessions(client)
            _write(trace, _turns(3, 6), "a")
            expected = _nodes_of(trace)
            deadline = time.monotonic() + 60
            after = before
            while time.monotonic() < deadline:
                after = await sessions(client)
                if after and after[0]["nodes"] >= expected:
                    break
                await asyncio.sleep(0.2)
            found = await client.call_tool(
                "search_history", {"query": "step 6", "session": after[0]["id"]}
            )
            return before, after, found.content[0].text  # type: ignore[union-attr]

    before, after, found = asyncio.run(body())
    assert len(before) == 1 and before[0]["nodes"] == _nodes_of_prefix(tmp_path, 2)
    assert [s["id"] for s in after] == [before[0]["id"]]
    assert after[0]["nodes"] == _nodes_of(trace)
    assert "step 6" in found


def _nodes_of_prefix(tmp_path: Path, rounds: int) -> int:
    prefix = tmp_path / "prefix.jsonl"
    _write(prefix, _turns(1, rounds))
    return _nodes_of(prefix)
