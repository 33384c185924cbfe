"""What a newcomer met in the first hour (issue 22, item 16), through the entry point."""

from __future__ import annotations

import json
import pydoc
import sqlite3
import sys
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from context import ContextStorage, Policy
from graph import ConversationGraph, SQLStore
from openprogram.cli import main
from tests.openprogram.test_cli_newcomer import chat_trace, openprogram


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _imported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    db = str(tmp_path / "a.db")
    trace = chat_trace(tmp_path / "chat.json", rounds=8)
    assert run(capsys, "--db", db, "import", str(trace), "--session", "s1")[0] == 0
    return db


def test_a_database_error_is_one_line_without_driver_or_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _imported(tmp_path, capsys)

    def locked(self: SQLStore) -> None:
        raise OperationalError(None, None, sqlite3.OperationalError("database is locked"))

    monkeypatch.setattr(SQLStore, "sessions", locked)
    code, _, err = run(capsys, "--db", db, "sessions")
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "locked" in err and "sqlite3" not in err and "Background" not in err
    assert "OperationalError" not in err


@pytest.mark.parametrize(
    "command",
    [
        ["replay", "chat.json"],
        ["context", "s1"],
        ["compact", "s1"],
        ["configure", "s1"],
        ["bench", "chat.json"],
    ],
)
@pytest.mark.parametrize("value", ["0", "-5"])
def test_every_budget_is_checked_the_same_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], value: str
) -> None:
    db = _imported(tmp_path, capsys)
    before = SQLStore(db, create=False).load("s1")
    argv = [str(tmp_path / part) if part.endswith(".json") else part for part in command]
    code, out, err = run(capsys, "--db", db, *argv, "--budget", value)
    assert (code, out) == (2, "")
    assert err.strip() == f"error: --budget must be positive (a number of tokens), got {value}"
    store = SQLStore(db, create=False)
    assert len(store.sessions()) == 1 and store.load("s1") == before  # nothing ran


def test_import_session_names_a_new_session_and_append_needs_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "a.db")
    trace = chat_trace(tmp_path / "chat.json")
    code, _, err = run(capsys, "--db", db, "import", str(trace), "--session", "NOPE", "--append")
    assert code == 2 and "no session 'NOPE'" in err
    assert not SQLStore(db, create=False).has_session("NOPE")
    code, out, _ = run(capsys, "--db", db, "import", str(trace), "--session", "NOPE")
    assert code == 0 and out.startswith("new session NOPE:")


def test_configure_without_flags_only_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _imported(tmp_path, capsys)
    before = SQLStore(db, create=False).session_meta("s1")
    code, out, _ = run(capsys, "--db", db, "configure", "s1")
    assert code == 0 and "policy claude-code" in out and "changed" not in out
    store = SQLStore(db, create=False)
    assert store.session_meta("s1") == before
    assert "openprogram.config" not in before  # an imported session stores none
    assert ContextStorage(store, "s1").configurations() == []


def test_a_replay_in_memory_names_no_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = chat_trace(tmp_path / "chat.json", rounds=30)
    code, out, _ = run(capsys, "replay", str(trace), "--memory", "--budget", "1200")
    assert code == 0 and "in memory only (gone on exit" in out
    assert "openprogram-state-" not in out and "records:" not in out


def test_narrow_tables_keep_ids_and_file_names_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "a.db")
    trace = chat_trace(tmp_path / "a-rather-long-trace-name.json", rounds=30)
    code, out, _ = run(capsys, "--db", db, "replay", str(trace), "--budget", "1200", "--json")
    session = json.loads(out)["session"]
    graph = ConversationGraph(SQLStore(db, create=False), session)
    layers = [layer.id for layer in graph.layers()]
    assert code == 0 and layers
    for argv in (["sessions"], ["collapses", session], ["records", session]):
        done = openprogram("--db", db, *argv, columns=40)
        assert done.returncode == 0, done.stderr
        for wanted in (session, *layers) if argv != ["sessions"] else (session,):
            assert any(wanted in line for line in done.stdout.splitlines()), (argv, wanted)
    done = openprogram("--db", db, "replay", str(trace), "--budget", "999", columns=40)
    assert done.returncode == 0, done.stderr
    assert any("a-rather-long-trace-name.json" in line for line in done.stdout.splitlines())


def test_help_policy_describes_every_field() -> None:
    text = pydoc.render_doc(Policy, renderer=pydoc.plaintext)
    assert len(Policy.model_fields) >= 56
    for name, info in Policy.model_fields.items():
        assert info.description, name
        assert f"{name} (default " in text, name


def test_tracing_without_the_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from openprogram import tracing

    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(ImportError, match=r"pip install 'openprogram\[otel\]'"):
        tracing.enable()
    tracing.disable()
