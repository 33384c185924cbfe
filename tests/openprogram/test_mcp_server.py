"""``openprogram mcp``: the SDK's own client starts the server over stdio and calls every tool
on a session with offloads, collapses and a compaction; scoping, unknown ids and oversized
requests are tool errors the model reads (SEP-1303), declared bounds, a server bound to one session
knowing no other; writing tools only with ``--allow-write``."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from graph import layer_handle, node_handle, text_of
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
    code = "import sys; from openprogram.cli import run; sys.argv[0] = 'openprogram'; run()"
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
        out["by_handle"] = [  # as prompts name them (issue 34): n<seq>, fn_<seq>, L<k>
            await _text(client, "inspect_node", id=node_handle(function_node), session=session.id),
            await _text(
                client, "expand_function", id=f"fn_{function_node.seq}", session=session.id
            ),
            await _text(client, "expand_layer", id=layer_handle(compaction), session=session.id),
        ]
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
    assert out["layer"] == session.history.expand_layer(compaction.id) == out["by_handle"][2]
    assert out["by_handle"][0] == out["inspect"]
    assert out["by_handle"][1] == session.history.expand_function(function_node.id)
    assert {line["handle"] for line in layer_lines} >= {layer_handle(compaction)}
    assert "looking up k_" in out["layer"]
    assert out["function"] == session.history.expand_function(function_node.id)
    assert "Summarize the keys." in out["function"]
    assert "k_3" in out["search"]
    assert out["context"]["tokens"] <= out["context"]["budget"]
    assert all(text and not text.startswith("Error") for text in out["named"])
    assert out["prompt"]["messages"][0]["role"] == "system"
    sources = out["prompt"]["sources"]  # issue 33: each message says where it came from
    assert len(sources) == len(out["prompt"]["messages"]) and sources[0]["unit"] == "system"
    assert {json.loads(line)["tier"] for line in out["records"].splitlines()} >= {
        "collapse",
        "compact",
    }


async def _outcome(client: Client, tool: str, **arguments: Any) -> tuple[bool, str]:
    """Whether the call was a tool error, and its text (a protocol error fails the test)."""
    result = await client.call_tool(tool, arguments)
    return result.is_error, "".join(getattr(part, "text", "") for part in result.content)


def test_tool_errors_are_results_the_model_reads(stored: tuple[Path, Session]) -> None:
    """SEP-1303: an unknown id, a session outside the scope, a value past a bound — each a
    result with isError (no JSON-RPC error), the same for the schema's bounds and ours."""
    db, session = stored
    calls: list[tuple[str, dict[str, Any]]] = [
        ("inspect_node", {"id": "01NOSUCHNODE0000000000000", "session": session.id}),
        ("read_output", {"id": "x", "session": "another"}),
        ("search_history", {"query": "word " * 1_000}),
        ("read_output", {"id": "x", "limit": 10**7}),
        ("read_output", {"id": "x", "offset": -1}),
        ("expand_function", {"id": "x", "depth": 0}),
        ("search_history", {"query": "k_3", "limit": 0}),
        ("expand_layer", {"id": "nolayer"}),
        ("read_output", {"id": "n99999", "session": session.id}),
    ]

    async def body(client: Client) -> list[tuple[bool, str]]:
        out = [await _outcome(client, tool, **arguments) for tool, arguments in calls]
        out.append(await _outcome(client, "list_sessions"))
        return out

    out = _with_client(_server(db, "--session", session.id), body)
    assert [error for error, _ in out[:-1]] == [True] * len(calls)
    texts = [text for _, text in out]
    assert "no node" in texts[0]
    assert "no session 'another'" in texts[1]
    assert "query" in texts[2] and "2000" in texts[2]
    assert "limit" in texts[3] and "8000" in texts[3]
    assert "offset" in texts[4] and "greater than or equal to 0" in texts[4]
    assert "depth" in texts[5] and "greater than or equal to 1" in texts[5]
    assert "limit" in texts[6]
    assert "nolayer" in texts[7]
    assert texts[8].endswith(": no node 'n99999' in this session; search_history finds ids")
    assert out[-1][0] is False and len(json.loads(texts[-1])) == 1


def test_input_schemas_declare_the_bounds(stored: tuple[Path, Session]) -> None:
    db, _ = stored

    async def body(client: Client) -> dict[str, Any]:
        return {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}

    schemas = _with_client(_server(db), body)

    def bounds(tool: str, name: str) -> tuple[Any, Any]:
        field = schemas[tool]["properties"][name]
        return field.get("minimum", field.get("minLength")), field.get(
            "maximum", field.get("maxLength")
        )

    for tool in ("read_output", "read_history", "expand_layer", "expand_function"):
        assert bounds(tool, "offset") == (0, None)
    assert bounds("read_output", "limit") == (1, 8_000)
    assert bounds("expand_function", "depth") == (1, 32)
    assert bounds("search_history", "limit") == (1, 200)
    assert bounds("search_history", "query") == (1, 2_000)


SECRET = "the vault code of session b is 4417"


@pytest.fixture(scope="module")
def two_sessions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Session, Session]:
    """Sessions A and B in one database, B with layers, a function and a secret."""
    tmp_path = tmp_path_factory.mktemp("mcp-two")
    db = tmp_path / "two.db"
    first = long_session(tmp_path, str(db), rounds=12, budget=4_000)
    second = long_session(tmp_path, str(db), rounds=30, budget=4_000)

    @function
    def vault() -> str:
        return str(llm(f"Remember: {SECRET}."))

    second.model = TestModel([SECRET])
    with second:
        vault()
    second.engine.compact("the vault")
    assert second.graph.layers()
    return db, first, second


def test_a_server_bound_to_a_session_knows_no_other(
    two_sessions: tuple[Path, Session, Session],
) -> None:
    """Served with --session A, everything of B — its name, layers, nodes, function,
    outputs, text in search results, resources — is "not found", and no answer names B,
    shows B's text or lists B's ids (beyond the one id a request itself passed)."""
    db, a, b = two_sessions
    b_layers = [layer.id for layer in b.graph.layers()]
    b_nodes = [node.id for node in b.graph.nodes()]
    b_function = next(n.id for n in b.graph.nodes() if n.kind == "function")
    b_tool = next(n.id for n in b.graph.nodes() if n.kind == "tool")
    b_ids = {b.id, *b_layers, *b_nodes}
    calls: list[tuple[str, dict[str, Any]]] = [
        ("expand_layer", {"id": b_layers[0]}),
        ("expand_layer", {"id": b_layers[-1], "session": a.id}),
        ("inspect_node", {"id": b_function}),
        ("read_output", {"id": b_tool}),
        ("expand_function", {"id": b_function}),
        ("read_history", {"first": b_nodes[1], "last": b_nodes[-1]}),
        ("list_layers", {"session": b.id}),
        ("read_output", {"id": b_tool, "session": b.id}),
        ("rollback", {"layer": b_layers[-1]}),
    ]

    async def body(client: Client) -> dict[str, Any]:
        out: dict[str, Any] = {
            "calls": [await _outcome(client, tool, **arguments) for tool, arguments in calls],
            "search": await _outcome(client, "search_history", query="vault code"),
            "sessions": await _outcome(client, "list_sessions"),
            "resources": [],
        }
        for kind in ("prompt", "records"):
            try:
                await client.read_resource(f"openprogram://sessions/{b.id}/{kind}")
                out["resources"].append("read")
            except MCPError as error:
                out["resources"].append(error.message)
        return out

    out = _with_client(_server(db, "--session", a.id, "--allow-write"), body)
    for (tool, arguments), (error, text) in zip(calls, out["calls"], strict=True):
        assert error, (tool, text)
        assert re.search(r"not found|no (node|layer|session) ", text), (tool, text)
        assert "belongs" not in text and SECRET not in text, (tool, text)
        leaked = {i for i in b_ids - set(arguments.values()) if i in text}
        assert not leaked, (tool, text)
    error, text = out["search"]
    assert not error and SECRET not in text and not {i for i in b_ids if i in text}
    assert [s["id"] for s in json.loads(out["sessions"][1])] == [a.id]
    for message in out["resources"]:
        assert message != "read" and "no session" in message
        assert not {i for i in b_ids - {b.id} if i in message}
    b.graph.refresh()
    assert all(layer.active for layer in b.graph.layers() if layer.id == b_layers[-1])


def test_rollback_and_compact_need_allow_write(stored: tuple[Path, Session]) -> None:
    db, session = stored
    active = [layer for layer in session.graph.layers() if layer.active]
    target = active[-1]

    async def body(client: Client) -> dict[str, Any]:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        rolled = json.loads(await _text(client, "rollback", layer=target.id, session=session.id))
        error, again = await _outcome(client, "rollback", layer=target.id, session=session.id)
        assert error
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
