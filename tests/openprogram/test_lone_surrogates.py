"""Ids, names and patterns holding a lone surrogate (issue 31, item 8): no database can store
one, so each entry point answers with one clear error naming the argument, never a raw
``UnicodeEncodeError`` from the driver: every CLI command (checked once, where arguments
are parsed), the library's lookups (the SQL store), the history tools and the MCP server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from graph import InvalidText
from openprogram import Session
from openprogram.cli import main
from openprogram.integrations.mcp import HistoryServer
from openprogram.testing import FunctionModel, ModelRequest, TestModel, tool_call

ROOT = Path(__file__).resolve().parents[2]
BAD = ["\ud800", "x\udfff"]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("surrogates") / "a.db")
    with Session(path, "s", model=TestModel(["Paris."])) as session:
        session.llm("Capital of France?")
    return path


COMMANDS = [
    (["show", "X"], "session"),
    (["show", "s", "X"], "node"),
    (["expand", "X"], "id"),
    (["rollback", "s", "X"], "layer"),
    (["fork", "s", "X"], "node"),
    (["fork", "s", "s", "--name", "X"], "--name"),
    (["checkout", "s", "X"], "target"),
    (["delete", "X"], "session"),
    (["export", "X", "out.json"], "session"),
    (["copy", "X", "--to", "b.db"], "session"),
    (["copy", "s", "--to", "b.db", "--as", "X"], "--as"),
    (["records", "X"], "session"),
    (["context", "X"], "session"),
    (["configure", "X"], "session"),
    (["compact", "X"], "session"),
    (["collapses", "X"], "session"),
    (["scrub", "s", "--pattern", "X"], "--pattern"),
]


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize(("argv", "named"), COMMANDS)
def test_every_command_names_the_argument(
    db: str, capsys: pytest.CaptureFixture[str], argv: list[str], named: str, bad: str
) -> None:
    code = main(["--db", db, *(bad if a == "X" else a for a in argv)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"error: {named} {bad!r} is not valid text: it holds a lone surrogate")
    assert "codec" not in err


def test_a_byte_that_is_not_utf8_on_a_real_command_line(db: str) -> None:
    argv: list[str | bytes] = [sys.executable, "-c", "from openprogram.cli import run; run()"]
    argv += ["--db", db, "rollback", "s", b"x\xff"]  # what a shell passes for $'x\xff'
    done = subprocess.run(
        argv,
        capture_output=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "LC_ALL": "C.UTF-8"},
        check=False,
    )
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert err.startswith("error: layer 'x\\udcff' is not valid text"), err
    assert "Traceback" not in err


@pytest.mark.parametrize("bad", BAD)
def test_the_library_says_what_it_cannot_look_up(store_url: str, bad: str) -> None:
    with Session(store_url, "s", model=TestModel(["Paris."])) as made:
        made.llm("Capital of France?")
    session = Session(store_url, "s")
    for call in (
        session.engine.expand,
        session.engine.rollback,
        session.graph.fork,
        session.graph.checkout,
        session.store.delete_session,
    ):
        with pytest.raises(InvalidText, match=r"is not valid text: it holds a lone surrogate"):
            call(bad)
    assert len(session.graph.nodes()) == 2  # nothing was lost


def test_a_history_tool_tells_the_model(tmp_path: Path) -> None:
    seen: list[str] = []

    def reply(request: ModelRequest) -> Any:
        results = [m for m in request.messages if m.get("role") == "tool"]
        if not results:
            return {
                "role": "assistant",
                "content": "",
                "tool_calls": [tool_call("expand_layer", {"id": "x\udfff"})],
            }
        seen.append(str(results[-1]["content"]))
        return "done"

    with Session(str(tmp_path / "a.db"), "s", model=FunctionModel(reply)) as session:
        assert session.llm("Expand it.") == "done"
    assert "is not valid text: it holds a lone surrogate" in seen[0]


def test_the_mcp_server_answers_with_a_tool_error(db: str) -> None:
    """The SDK's own client cannot send a lone surrogate (its JSON encoder refuses one, as
    its parser does), so the server is called as ``build_server`` wires it."""
    server = HistoryServer(db, allow_write=True)
    for call in (
        lambda: server.expand_layer("x\udfff", session="s"),
        lambda: server.rollback("\ud800", session="s"),
        lambda: server.read_output("x", session="\ud800"),
        lambda: server.context(session="x\udfff"),
    ):
        with pytest.raises(ToolError, match="is not valid text: it holds a lone surrogate"):
            call()
    with pytest.raises(ToolError, match=r"no node '\\ud800'"):  # looked up in memory
        server.inspect_node("\ud800", session="s")
