"""Scrubbing removes a secret that is already stored: from every row, from the state
folder's files, from SQLite's free pages and PostgreSQL's tables, with an audit entry that
names what was scrubbed but not the secret."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from context import SentPrompt
from graph import AUDIT, ConversationGraph, Redactor, dispose_engines
from openprogram import Session

# Matches no default pattern: only a scrub (not redaction) can take it out.
MESSAGES = "context.messages"  # the side data the sent prompts are stored in
SECRET = "hunter2-internal-XQ7Z-9981-correcthorse"
ROOT = Path(__file__).resolve().parents[1]
KNOWN = "sk-ant-api03-Zx8Lq2Wm5Np9Rt4Yv7Bc1Df6Gh3Jk0Mn-_QpRsTuVwXyZaB"


def _leaky_session(url: str, state: Path) -> Session:
    """A session with the secret in a message, a tool call and its (offloaded) output, a
    function's input and error, node meta, a collapse summary and its records."""
    s = Session(url, "s", state_dir=state, system="You deploy.", budget=8_000)
    g = s.graph
    g.append({"role": "user", "content": f"deploy with {SECRET}"}, meta={"note": SECRET})
    call = {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}
    g.append({"role": "assistant", "content": None, "tool_calls": [call]})
    g.append({"role": "tool", "tool_call_id": "c1", "content": f"{SECRET}\n" + "x" * 30_000})
    with pytest.raises(RuntimeError), g.function("deploy", input={"key": SECRET}):
        raise RuntimeError(f"401 {SECRET} {KNOWN}")
    for i in range(6):
        g.append({"role": "user", "content": f"step {i} {SECRET}"})
        g.append({"role": "assistant", "content": f"did {i} with {SECRET} " + "w " * 40})
    s.engine.render()
    s.engine.collapse(g.nodes()[2].id, g.nodes()[-1].id)
    return s


def _files_holding(folder: Path, needle: bytes) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_scrub_removes_the_secret_from_the_sqlite_file_and_the_state_folder(
    tmp_path: Path,
) -> None:
    db, state = tmp_path / "s.db", tmp_path / "state"
    s = _leaky_session(str(db), state)
    assert _files_holding(tmp_path, SECRET.encode())  # it leaked: db, offload, records
    assert list((state / "tool_results" / "s").iterdir())
    report = s.scrub({"deploy-key": SECRET})
    assert set(report.rows) >= {"nodes", "events", "logs"}
    assert report.replaced >= 10 and report.files and "VACUUM" in report.vacuumed
    s.close()
    dispose_engines()
    assert _files_holding(tmp_path, SECRET.encode()) == []
    assert _files_holding(tmp_path, b"hunter2") == []
    # still readable; the secret shows as its label
    again = ConversationGraph.open(db, session="s")
    shown = json.dumps(again.to_openai())
    assert "[REDACTED:deploy-key]" in shown and SECRET not in shown
    [audit] = again.store.read_log("s", AUDIT)
    entry = json.loads(audit.body)
    assert entry["labels"] == ["deploy-key"] and entry["replaced"] == report.replaced
    assert "hunter2" not in audit.body and "XQ7Z" not in audit.body
    assert s.graph.nodes()[1].payload.content == "deploy with [REDACTED:deploy-key]"


def test_the_cli_scrubs_known_key_formats_and_literal_text(tmp_path: Path, capsys: Any) -> None:
    from openprogram.cli import main

    db, state = tmp_path / "c.db", tmp_path / "state"
    _leaky_session(str(db), state).close()
    base = ["--db", str(db), "--state-dir", str(state), "scrub", "s"]
    assert main([*base]) == 2  # says what to scrub
    assert main([*base, "--known", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["labels"][0] == "private-key"
    assert main([*base, "--pattern", SECRET, "--literal", "--label", "deploy"]) == 0
    out = capsys.readouterr().out
    assert "scrubbed session s" in out and SECRET not in out
    dispose_engines()
    assert _files_holding(tmp_path, SECRET.encode()) == []
    assert _files_holding(tmp_path, KNOWN.encode()) == []
    assert main(["--db", str(db), "scrub", "nobody", "--known"]) == 1


def test_scrub_leaves_other_sessions_alone(tmp_path: Path) -> None:
    db = tmp_path / "o.db"
    for name in ("a", "b"):
        ConversationGraph.open(db, session=name).append({"role": "user", "content": SECRET})
    s = Session(str(db), "a", state_dir=tmp_path / "state")
    s.scrub(SECRET)
    assert ConversationGraph.open(db, session="b").to_openai()[0]["content"] == SECRET
    assert s.graph.to_openai()[0]["content"] == "[REDACTED:pattern-1]"


def test_scrub_never_follows_a_symlink_out_of_the_state_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text(SECRET)
    state = tmp_path / "state"
    (state / "tool_results").mkdir(parents=True)
    (state / "tool_results" / "s").symlink_to(outside)
    (state / "records").mkdir()
    (state / "records" / "s.jsonl").symlink_to(outside / "keep.txt")
    s = Session(str(tmp_path / "l.db"), "s", state_dir=state)
    s.graph.append({"role": "user", "content": SECRET})
    report = s.scrub(SECRET)
    assert report.files == () and (outside / "keep.txt").read_text() == SECRET


def test_scrub_on_a_memory_store_and_with_a_redactor() -> None:
    g = ConversationGraph.memory("m")
    g.append({"role": "user", "content": f"a {KNOWN}"}, meta={"k": KNOWN})
    s = Session(g.store, "m")
    report = s.scrub(Redactor())
    assert report.rows == {"nodes": 1} and report.replaced == 2
    assert KNOWN not in json.dumps(s.graph.to_openai())


@pytest.mark.postgres
def test_scrub_vacuums_postgresql_so_the_table_files_lose_the_secret(
    pg_db_url: str, tmp_path: Path
) -> None:
    s = _leaky_session(pg_db_url, tmp_path / "state")
    report = s.scrub({"deploy-key": SECRET})
    assert report.vacuumed.startswith("VACUUM FULL")
    s.close()
    dispose_engines()
    engine = create_engine(pg_db_url, poolclass=NullPool)
    with engine.connect() as connection:
        for table in ("graph_nodes", "graph_events", "graph_logs", "graph_values"):
            found = connection.execute(
                text(f"SELECT count(*) FROM {table} WHERE CAST({table} AS text) LIKE :s"),
                {"s": f"%{SECRET}%"},
            ).scalar()
            assert found == 0, table
        connection.commit()
        auto = connection.execution_options(isolation_level="AUTOCOMMIT")
        auto.execute(text("CHECKPOINT"))
        datadir = Path(str(auto.execute(text("SHOW data_directory")).scalar()))
        oid = auto.execute(text("SELECT oid FROM pg_database WHERE datname = current_database()"))
        folder = datadir / "base" / str(oid.scalar())
    engine.dispose()
    assert folder.is_dir()
    assert _files_holding(folder, SECRET.encode()) == []
    assert _files_holding(tmp_path / "state", SECRET.encode()) == []


# -- one implementation, the database's own folder, and nothing left anywhere -------------


def _cli(capsys: Any, *argv: str) -> str:
    """``openprogram ARGV…`` as a user runs it; what it printed (exit 0 asserted)."""
    from openprogram.cli import main

    code = main(list(argv))
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out + out.err


def _mcp_answers(db: Path, node: str) -> str:
    """What the MCP server gives a client about the session: tool results and resources."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    code = "import sys; from openprogram.cli import run; sys.argv[0] = 'openprogram'; run()"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", code, "mcp", "--db", str(db)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=str(db.parent),
    )

    async def run() -> str:
        async with Client(params, raise_exceptions=True) as client:
            parts = []
            for tool, arguments in (
                ("read_output", {"id": node}),
                ("search_history", {"query": "hunter2"}),
                ("search_history", {"query": "deploy"}),
                ("context", {}),
                ("list_layers", {}),
            ):
                result = await client.call_tool(tool, {**arguments, "session": "s"})
                parts += [getattr(part, "text", "") for part in result.content]
            for name in ("prompt", "records"):
                found = await client.read_resource(f"openprogram://sessions/s/{name}")
                parts += [getattr(part, "text", "") for part in found.contents]
            return "\n".join(parts)

    return asyncio.run(run())


def _rows_holding(db: Path, needle: str) -> list[str]:
    """Every table of the SQLite file, every column, as text: where ``needle`` is."""
    connection = sqlite3.connect(db)
    try:
        tables = [
            r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        found = []
        for table in tables:
            for row in connection.execute(f'SELECT * FROM "{table}"'):
                if any(needle in str(value) for value in row):
                    found.append(table)
        return found
    finally:
        connection.close()


@pytest.mark.parametrize("entry", ["cli", "session"])
def test_scrub_with_the_default_state_folder_leaves_the_secret_nowhere(
    tmp_path: Path, entry: str, capsys: Any
) -> None:
    db = tmp_path / "op.db"
    s = Session(str(db), "s", system="You deploy.", budget=8_000)
    assert s.folder.path == tmp_path / "op.db.state"
    g = s.graph
    g.append({"role": "user", "content": f"deploy with {SECRET}"})
    call = {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}
    g.append({"role": "assistant", "content": None, "tool_calls": [call]})
    tool = g.append({"role": "tool", "tool_call_id": "c1", "content": f"{SECRET}\n" + "x" * 30_000})
    for i in range(6):
        g.append({"role": "user", "content": f"step {i} {SECRET}"})
        g.append({"role": "assistant", "content": f"did {i} with {SECRET} " + "w " * 40})
    s.engine.render()
    s.engine.collapse(g.nodes()[2].id, g.nodes()[-1].id)
    offloaded = tmp_path / "op.db.state" / "tool_results" / "s" / f"{tool.id}.txt"
    log = tmp_path / "op.db.state" / "records" / "s.jsonl"
    assert SECRET.encode() in offloaded.read_bytes() and SECRET.encode() in log.read_bytes()
    sent = s.graph.store.get_values("s", MESSAGES)  # the prompt as sent, kept by its receipt
    assert any(SECRET in message for message in sent.values())
    if entry == "cli":
        s.close()
        dispose_engines()
        out = _cli(capsys, "--db", str(db), "scrub", "s", "--pattern", SECRET, "--literal")
        assert "rewrote tool_results/s/" in out and "rewrote records/s.jsonl" in out
        dispose_engines()
    else:
        report = s.scrub({"deploy-key": SECRET})
        assert f"tool_results/s/{tool.id}.txt" in report.files and "records/s.jsonl" in report.files
        s.close()
        dispose_engines()
    assert b"[REDACTED:" in offloaded.read_bytes() and b"[REDACTED:" in log.read_bytes()
    # at rest: every table, the database file's bytes (free pages, -wal, -shm), the folder
    assert _rows_holding(db, SECRET) == []
    assert _files_holding(tmp_path, SECRET.encode()) == []
    # and everything read from it afterwards: exports, rendered prompts, MCP results
    shown = []
    for name, extra in (
        ("out.json", ()),
        ("out.graphml", ()),
        ("openai.json", ("--format", "openai")),
    ):
        _cli(capsys, "--db", str(db), "export", "s", str(tmp_path / name), *extra)
        shown.append((tmp_path / name).read_text())
    for command in (["context", "s"], ["context", "s", "--json"], ["show", "s"], ["records", "s"]):
        shown.append(_cli(capsys, "--db", str(db), *command))
    again = Session(str(db), "s")
    last = again.last_prompt()
    assert isinstance(last, SentPrompt)  # read back from the scrubbed stored messages
    shown.append(json.dumps(last.messages))
    assert "[REDACTED:" in shown[-1]
    shown.append(json.dumps(again.engine.render().messages))
    shown.append(again.history.read_output(tool.id))
    again.close()
    dispose_engines()
    with capsys.disabled():  # the stdio client hands the server a real stderr
        shown.append(_mcp_answers(db, tool.id))
    for index in (0, -3, -2, -1):  # the export, the render, the output read, MCP's answers
        assert "[REDACTED:" in shown[index]
    assert [SECRET in text for text in shown] == [False] * len(shown)
    assert _files_holding(tmp_path, SECRET.encode()) == []
