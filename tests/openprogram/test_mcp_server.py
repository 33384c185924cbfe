"""``openprogram mcp``: the SDK's own client starts the server over stdio and calls every tool
on a session with offloads, collapses and a compaction; scoping, unknown ids and oversized
requests are MCP errors; writing tools only with ``--allow-write``."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from graph import text_of
from openprogram import Session, function, llm
from openprogram.testing import TestModel
from tests.openprogram._runtime_helpers import long_session, placeholders

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Session]:
    tmp_path = tmp_path_factory.mktemp("mcp")
    db = tmp_path / "agent.db"
    session = long_session(tmp_path, str(db), rounds=40, budget=4_000)

    @function
    def summarize(topic: str) -> str:
        return str(llm(f"Summarize {topic}."))

    session.model = TestModel(["the keys are all stored"])
    with session:
        summarize("the keys")
    session.engine.compact("the keys")
    tiers = {r.tier for r in session.engine.records()}
    assert {"offload", "collapse", "compact"} <= tiers
    return db, session


def _server(db: Path, *extra: str) -> StdioServerParameters:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "import sys; from openprogram._cli import run; sys.argv[0] = 'openprogram'; run()"
    return StdioServerParameters(
        command=sys.executable,
        args=["-c", code, "mcp", "--db", str(db), *extra],
        env=env,
        cwd=str(db.parent),
    )


def _with_client(params: StdioServerParameters, body: Callable[[Client], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        async with Client(params, raise_exceptions=True) as client:
            return await body(client)

    return asyncio.run(run())


async def _text(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return "".join(getattr(part, "text", "") for part in result.content)


def test_every_tool_over_stdio(stored: tuple[Path, Session]) -> None:
    db, session = stored
    layers = session.graph.layers()
    compaction = next(layer for layer in layers if layer.kind == "compact" and layer.active)
    function_node = next(n for n in session.graph.nodes() if n.kind == "function")
    offloaded = next(r for r in session.engine.records() if r.tier == "offload").offloaded[0]
    named = [
        (tool, args)
        for message in session.engine.preview().messages
        for tool, args in placeholders([message])
    ]

    async def body(client: Client) -> dict[str, Any]:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        out: dict[str, Any] = {"tools": tools}
        out["sessions"] = json.loads(await _text(client, "list_sessions"))
        out["layers"] = await _text(client, "list_layers", session=session.id)
        out["inspect"] = await _text(
            client, "inspect_node", id=function_node.id, session=session.id
        )
        out["output"] = await _text(
            client, "read_output", id=offloaded["node"], session=session.id, limit=500
        )
        out["layer"] = await _text(client, "expand_layer", id=compaction.id, session=session.id)
        out["function"] = await _text(
            client, "expand_function", id=function_node.id, session=session.id
        )
        out["search"] = await _text(client, "search_history", query="k_3", session=session.id)
        out["context"] = json.loads(await _text(client, "context", session=session.id))
        out["named"] = [
            await _text(
                client,
                tool,
                **dict(
                    zip(
                        ("id",) if tool != "read_history" else ("first", "last"), args, strict=False
                    )
                ),
                session=session.id,
            )
            for tool, args in named
            if tool in ("read_output", "expand_layer", "expand_function", "read_history")
        ]
        prompt = await client.read_resource(f"openprogram://sessions/{session.id}/prompt")
        out["prompt"] = json.loads(prompt.contents[0].text)  # type: ignore[union-attr]
        records = await client.read_resource(f"openprogram://sessions/{session.id}/records")
        out["records"] = records.contents[0].text  # type: ignore[union-attr]
        return out

    out = _with_client(_server(db), body)
    assert out["tools"] == {
        "list_sessions",
        "list_layers",
        "read_output",
        "read_history",
        "expand_layer",
        "expand_function",
        "search_history",
        "inspect_node",
        "context",
    }
    assert [s["id"] for s in out["sessions"]] == [session.id]
    layer_lines = [json.loads(line) for line in out["layers"].splitlines()]
    assert {line["id"] for line in layer_lines} == {layer.id for layer in session.graph.layers()}
    assert json.loads(out["inspect"].splitlines()[0])["function"] == "summarize"
    original = text_of(session.graph.get(offloaded["node"]).result.content)  # type: ignore[union-attr]
    assert out["output"].startswith(original[:500])
    assert out["layer"] == session.history.expand_layer(compaction.id)
    assert "looking up k_" in out["layer"]
    assert out["function"] == session.history.expand_function(function_node.id)
    assert "Summarize the keys." in out["function"]
    assert "k_3" in out["search"]
    assert out["context"]["tokens"] <= out["context"]["budget"]
    assert all(text and not text.startswith("Error") for text in out["named"])
    assert out["prompt"]["messages"][0]["role"] == "system"
    assert {json.loads(line)["tier"] for line in out["records"].splitlines()} >= {
        "collapse",
        "compact",
    }


def test_scope_unknown_ids_and_oversized_requests_are_mcp_errors(
    stored: tuple[Path, Session],
) -> None:
    db, session = stored

    async def body(client: Client) -> list[str]:
        messages = []
        for tool, arguments in (
            ("inspect_node", {"id": "01NOSUCHNODE0000000000000", "session": session.id}),
            ("read_output", {"id": "x", "session": "another"}),
            ("search_history", {"query": "word " * 1_000}),
            ("read_output", {"id": "x", "limit": 10**7}),
            ("expand_layer", {"id": "nolayer"}),
        ):
            try:
                await client.call_tool(tool, arguments)
            except MCPError as error:
                messages.append(error.message)
            else:
                messages.append("no error")
        sessions = json.loads(await _text(client, "list_sessions"))
        messages.append(str(len(sessions)))
        return messages

    messages = _with_client(_server(db, "--session", session.id), body)
    assert "no node" in messages[0]
    assert "outside this server's scope" in messages[1]
    assert "query of" in messages[2]
    assert "limit must be between" in messages[3]
    assert "nolayer" in messages[4]
    assert messages[5] == "1"


def test_rollback_and_compact_need_allow_write(stored: tuple[Path, Session]) -> None:
    db, session = stored
    active = [layer for layer in session.graph.layers() if layer.active]
    target = active[-1]

    async def body(client: Client) -> dict[str, Any]:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        rolled = json.loads(await _text(client, "rollback", layer=target.id, session=session.id))
        try:
            await client.call_tool("rollback", {"layer": target.id, "session": session.id})
            again = "no error"
        except MCPError as error:
            again = error.message
        return {"tools": tools, "rolled": rolled, "again": again}

    async def read_only(client: Client) -> set[str]:
        return {tool.name for tool in (await client.list_tools()).tools}

    assert not {"rollback", "compact"} & _with_client(_server(db), read_only)
    out = _with_client(_server(db, "--allow-write"), body)
    assert {"rollback", "compact"} <= out["tools"]
    assert target.id in out["rolled"]["rolled_back"]
    assert "rolled back" in out["again"]
    session.graph.refresh()
    assert not next(i for i in session.graph.layers() if i.id == target.id).active
