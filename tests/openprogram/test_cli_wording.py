"""What the CLI says and how it exits (issue 35, item 6): a first configuration is said to
be stored (not "changed created"), counts agree with their nouns, a bad ``--session`` is a
usage error about the id, and a busy port or a missing ``--html`` folder is a runtime
error (exit 1), not a usage one."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from openprogram.cli import main
from tests.openprogram.test_cli_newcomer import chat_trace


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, " ".join(captured.out.split()), " ".join(captured.err.split())


@pytest.fixture
def imported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    db = str(tmp_path / "a.db")
    trace = chat_trace(tmp_path / "chat.json", rounds=1)
    code, out, _ = run(capsys, "--db", db, "import", str(trace), "--session", "s1")
    assert code == 0
    assert "5 messages, 1 tool call, 0 functions" in out  # "1 tool call", not "1 tool calls"
    return db


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield int(held.getsockname()[1])


def test_the_first_configuration_is_stored_then_changes_are_recorded(
    imported: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "--db", imported, "configure", "s1", "--budget", "5000")
    assert code == 0 and "created" not in out
    assert "s1: configuration stored for the first time (budget set" in out
    code, out, _ = run(capsys, "--db", imported, "configure", "s1", "--budget", "6000")
    assert code == 0 and "s1: changed budget (recorded)" in out
    assert "budget 6,000 of a 128,000-token window" in out and "tokenizer cl100k_base" in out


def test_counts_agree_with_their_nouns(imported: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--db", imported, "check")
    assert code == 0 and "1 session checked" in out and "(5 nodes)" in out
    code, out, _ = run(capsys, "--db", imported, "show", "s1")
    assert code == 0 and "(5 nodes," in out


@pytest.mark.parametrize("bad", ["bad id", "../x", "a/b", ""])
def test_a_bad_session_id_is_a_usage_error_about_the_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    trace = chat_trace(tmp_path / "chat.json", rounds=1)
    with pytest.raises(SystemExit) as exit:
        main(["--db", str(tmp_path / "a.db"), "import", str(trace), "--session", bad])
    assert exit.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"argument --session: {bad!r} cannot be a session id" in err
    assert "invalid message" not in err and not (tmp_path / "a.db").exists()


def test_a_busy_port_is_a_runtime_error(
    imported: str, busy_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("uvicorn")
    code, _, err = run(capsys, "--db", imported, "view", "--port", str(busy_port), "--no-open")
    assert code == 1
    assert f"cannot listen on 127.0.0.1:{busy_port}" in err and "with --port" in err


def test_a_busy_mcp_port_is_a_runtime_error(
    imported: str, busy_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("mcp")
    code, out, err = run(capsys, "--db", imported, "mcp", "--http", str(busy_port))
    assert code == 1 and out == ""
    assert err.startswith(f"error: cannot listen on 127.0.0.1:{busy_port}")
    assert "with --http" in err


def test_a_missing_html_folder_is_a_runtime_error(
    imported: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("starlette")
    missing = tmp_path / "nowhere" / "x.html"
    code, _, err = run(capsys, "--db", imported, "view", "--html", str(missing))
    assert code == 1 and f"there is no folder {missing.parent}" in err
    assert not missing.parent.exists()
