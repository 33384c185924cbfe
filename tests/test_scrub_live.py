"""A scrub in one process reaches the readers and writers already running in others: the
MCP server started before it, and a live agent session with its graph, engine and tier
state in memory, which keeps the lease of the function it runs."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from graph import dispose_engines
from openprogram import Session, current_frame, function
from openprogram.testing import TestModel, tool_call

# Matches no default pattern: only a scrub (not redaction) can take it out.
SECRET = "hunter2-internal-XQ7Z-9981-correcthorse"
ROOT = Path(__file__).resolve().parents[1]
CLI = "import sys; from openprogram.cli import run; sys.argv[0] = 'openprogram'; run()"


def _scrub_elsewhere(db: Path) -> str:
    """``openprogram scrub`` in a process of its own, as an operator runs it."""
    done = subprocess.run(
        [sys.executable, "-c", CLI, "--db", str(db), "scrub", "s", "--pattern", SECRET],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=db.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "scrubbed session s" in done.stdout
    return done.stdout


def _leaky(db: Path, model: TestModel) -> tuple[Session, str]:
    """A session whose history holds the secret in a message and a large tool output."""

    def fetch() -> str:
        """Fetch the deploy log."""
        return f"log: {SECRET}\n" + "line\n" * 4_000

    s = Session(str(db), "s", model=model, system="You deploy.", budget=8_000)
    s.llm(f"deploy with {SECRET}", tools=[fetch])
    tool = next(n for n in s.graph.nodes() if n.kind == "tool")
    return s, tool.id


def test_a_running_mcp_server_stops_serving_a_secret_scrubbed_by_another_process(
    tmp_path: Path,
) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    db = tmp_path / "mcp.db"
    model = TestModel([{"content": None, "tool_calls": [tool_call("fetch")]}], default="done")
    s, tool = _leaky(db, model)
    user = next(n.id for n in s.graph.nodes() if n.kind == "dialogue" and SECRET in str(n.payload))
    s.close()
    dispose_engines()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", CLI, "mcp", "--db", str(db)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=str(tmp_path),
    )

    async def answers(client: Client) -> dict[str, str]:
        found = {}
        for tool_name, arguments in (
            ("read_output", {"id": tool}),
            ("search_history", {"query": "hunter2"}),
            ("inspect_node", {"id": user}),
            ("inspect_node", {"id": tool}),
            ("context", {}),
        ):
            result = await client.call_tool(tool_name, {**arguments, "session": "s"})
            key = f"{tool_name} {json.dumps(arguments)}"
            found[key] = "\n".join(getattr(part, "text", "") for part in result.content)
        for name in ("prompt", "records"):
            read = await client.read_resource(f"openprogram://sessions/s/{name}")
            found[name] = "\n".join(getattr(part, "text", "") for part in read.contents)
        return found

    async def run() -> tuple[dict[str, str], dict[str, str]]:
        async with Client(params, raise_exceptions=True) as client:
            before = await answers(client)
            await asyncio.to_thread(_scrub_elsewhere, db)
            return before, await answers(client)

    before, after = asyncio.run(run())
    holding = [key for key, text in before.items() if SECRET in text]
    assert {"prompt", f"read_output {json.dumps({'id': tool})}"} <= set(holding)
    assert any(key.startswith("search_history") for key in holding)
    assert [key for key, text in after.items() if SECRET in text] == []
    assert "[REDACTED:pattern-1]" in after[f"read_output {json.dumps({'id': tool})}"]
    assert "[REDACTED:pattern-1]" in after["prompt"]


def test_a_live_session_sends_no_secret_scrubbed_by_another_process(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    model = TestModel([{"content": None, "tool_calls": [tool_call("fetch")]}], default="done")
    s, tool = _leaky(db, model)
    assert SECRET in json.dumps(model.requests[-1].messages)
    seen: dict[str, Any] = {}

    @function
    def deploy() -> str:
        s.llm("check the log")  # leased and rendered before the scrub
        fn = current_frame().function
        seen["held"] = fn is not None and fn in s.leases.mine()
        seen["scrubbed"] = _scrub_elsewhere(db)
        answer = s.llm("go on")  # the same process, graph, engine and lease
        seen["kept"] = fn in s.leases.mine() and fn not in s.leases.lost
        return str(answer)

    with s:
        assert deploy() == "done"
    sent = json.dumps(model.requests[-1].messages)
    assert SECRET not in sent and "[REDACTED:pattern-1]" in sent
    assert seen["held"] and seen["kept"]
    assert SECRET not in s.history.read_output(tool)
    assert SECRET not in json.dumps(s.engine.render().messages)
    s.close()


def test_a_second_session_object_picks_up_a_scrub_before_its_next_render(
    tmp_path: Path,
) -> None:
    db = tmp_path / "two.db"
    model = TestModel([{"content": None, "tool_calls": [tool_call("fetch")]}], default="done")
    live, tool = _leaky(db, model)
    live.engine.render()  # tier state, built units and token counts cached
    other = Session(str(db), "s")
    other.scrub({"key": SECRET})
    live.llm("again")
    sent = json.dumps(model.requests[-1].messages)
    assert SECRET not in sent and "[REDACTED:key]" in sent
    assert SECRET not in live.graph.get(tool).result.content  # type: ignore[union-attr]
    assert SECRET not in json.dumps(live.engine.preview().messages)
    other.close()
    live.close()


def test_a_running_viewer_shows_no_scrubbed_secret_and_its_live_pages_notice(
    tmp_path: Path,
) -> None:
    from starlette.testclient import TestClient

    # internal: the web view served in process to a test client (the scrub runs elsewhere)
    from openprogram._view import Viewer
    from openprogram._view._app import COOKIE, create_app

    db = tmp_path / "view.db"
    model = TestModel([{"content": None, "tool_calls": [tool_call("fetch")]}], default="done")
    s, tool = _leaky(db, model)
    s.close()
    dispose_engines()
    app = create_app(Viewer(str(db), None), token="t", hosts={"127.0.0.1:9"})
    paths = ("/s/s/prompt", f"/s/s/node/{tool}", "/s/s/search?q=hunter2", "/s/s/nodes", "/s/s")
    with TestClient(app, base_url="http://127.0.0.1:9") as client:
        client.cookies.set(COOKIE, "t")
        before = {path: client.get(path).text for path in paths}
        version = client.get("/s/s/version").text
        _scrub_elsewhere(db)
        after = {path: client.get(path).text for path in paths}
        assert client.get("/s/s/version").text != version  # live pages reload
    assert {"/s/s/prompt", f"/s/s/node/{tool}"} <= {p for p, t in before.items() if SECRET in t}
    assert [path for path, page in after.items() if SECRET in page] == []
    assert "[REDACTED:pattern-1]" in after[f"/s/s/node/{tool}"]


def test_a_follower_goes_on_with_a_session_scrubbed_by_another_process(tmp_path: Path) -> None:
    from graph import ConversationGraph, SQLStore

    # internal: `openprogram follow`'s follower, driven poll by poll
    from openprogram._traces._follow import TraceFollower

    trace, db = tmp_path / "agent.jsonl", tmp_path / "follow.db"

    def record(n: int, content: str) -> str:
        parent = f"u{n - 1}" if n > 1 else None
        message = {"role": "user", "content": content}
        return json.dumps(
            {"parentUuid": parent, "isSidechain": False, "userType": "external",
             "sessionId": "f-1", "type": "user", "uuid": f"u{n}",
             "timestamp": "2026-01-01T10:00:00.000Z", "message": message}
        ) + "\n"  # fmt: skip

    trace.write_text(record(1, f"deploy with {SECRET}") + record(2, "then test"))
    store = SQLStore(db)
    follower = TraceFollower(store, trace, session="s", settle=0)
    assert follower.poll() is not None
    _scrub_elsewhere(db)
    with trace.open("a") as out:
        out.write(record(3, "and ship"))
    grown = follower.poll()
    assert grown is not None and follower.error is None and follower.session == "s"
    texts = [str(m.get("content")) for m in ConversationGraph(store, "s").to_openai()]
    assert texts == ["deploy with [REDACTED:pattern-1]", "then test", "and ship"]
    assert [info.id for info in store.sessions()] == ["s"]
    store.close()
