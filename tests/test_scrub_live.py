"""A scrub in one process reaches the readers and writers already running in others: the
MCP server started before it, and a live agent session with its graph, engine and tier
state in memory, which keeps the lease of the function it runs."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from _scrub_helpers import CLI, ROOT, SECRET, leaky, scrub_elsewhere

from graph import dispose_engines
from openprogram import Session, current_frame, function
from openprogram.testing import TestModel, tool_call


def test_a_running_mcp_server_stops_serving_a_secret_scrubbed_by_another_process(
    tmp_path: Path,
) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    db = tmp_path / "mcp.db"
    model = TestModel([{"content": None, "tool_calls": [tool_call("fetch")]}], default="done")
    s, tool = leaky(db, model)
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
            await asyncio.to_thread(scrub_elsewhere, db)
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
    s, tool = leaky(db, model)
    assert SECRET in json.dumps(model.requests[-1].messages)
    seen: dict[str, Any] = {}

    @function
    def deploy() -> str:
        s.llm("check the log")  # leased and rendered before the scrub
        fn = current_frame().function
        seen["held"] = fn is not None and fn in s.leases.mine()
        seen["scrubbed"] = scrub_elsewhere(db)
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
    live, tool = leaky(db, model)
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
