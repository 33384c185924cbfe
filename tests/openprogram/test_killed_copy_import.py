"""A ``copy`` or ``import`` killed mid-way leaves nothing: the target session is created in
the transaction that writes its data, so the retry works. A session an older version left
empty is shown as such by ``sessions`` and can be deleted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from graph import ConversationGraph, SQLStore, dispose_engines
from openprogram.cli import main

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import sys, time
from graph import SQLStore
from openprogram.cli import main

original = SQLStore.commit  # the child process dies inside it

def commit(self, session, *args, **kwargs):
    first = original(self, session, *args, **kwargs)
    if session in ("s", "t"):  # inside the target's data transaction: wait for the kill
        print("inside", flush=True)
        time.sleep(120)
    return first

SQLStore.commit = commit
main(sys.argv[1:])
"""


def _killed(argv: list[str], cwd: Path) -> None:
    """Run the CLI with ``argv`` until it is inside its data transaction, then SIGKILL it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line == "inside\n", child.stderr.read() if child.stderr else line
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate()
    assert child.returncode == -signal.SIGKILL


def _trace(tmp_path: Path, count: int = 20) -> Path:
    path = tmp_path / "chat.json"
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(count)
    ]
    path.write_text(json.dumps(messages))
    return path


def _source(db: Path | str) -> None:
    graph = ConversationGraph.open(db, "src")
    for index in range(10):
        graph.append({"role": "user", "content": f"q{index}"})
    graph.close()


def test_a_killed_copy_leaves_no_session(store_url: str, tmp_path: Path) -> None:
    db = store_url
    _source(db)
    _killed(["--db", str(db), "copy", "src", "--to", str(db), "--as", "s"], tmp_path)
    assert [info.id for info in SQLStore(db).sessions()] == ["src"]
    assert (
        main(["--db", str(db), "copy", "src", "--to", str(db), "--as", "s"]) == 0
    )  # the retry works
    assert len(ConversationGraph.open(db, "s")) == 10
    dispose_engines()


def test_a_killed_import_leaves_no_session(store_url: str, tmp_path: Path) -> None:
    db = store_url
    trace = _trace(tmp_path)
    _killed(["--db", str(db), "import", str(trace), "--session", "t"], tmp_path)
    assert SQLStore(db).sessions() == []
    assert main(["--db", str(db), "import", str(trace), "--session", "t"]) == 0
    assert len(ConversationGraph.open(db, "t")) == 20
    dispose_engines()


def test_a_session_left_empty_is_shown_and_removable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "op.db"
    _source(db)
    store = SQLStore(db)
    store.ensure_session("s")  # what an older version left after a killed copy
    assert main(["--db", str(db), "sessions"]) == 0
    out = capsys.readouterr().out
    assert out.count("0 (empty)") == 1 and "`openprogram delete ID` removes it" in out
    assert main(["--db", str(db), "copy", "src", "--to", str(db), "--as", "s"]) == 1
    err = capsys.readouterr().err
    assert "is empty" in err and "openprogram delete s" in err
    assert main(["--db", str(db), "sessions", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(s["id"], s["nodes"], s["empty"]) for s in listed] == [
        ("src", 10, False),
        ("s", 0, True),
    ]
    assert main(["--db", str(db), "delete", "s"]) == 0
    assert [info.id for info in store.sessions()] == ["src"]
    assert main(["--db", str(db), "copy", "src", "--to", str(db), "--as", "s"]) == 0
    dispose_engines()


def test_a_session_made_by_its_first_write(tmp_path: Path) -> None:
    store = SQLStore(tmp_path / "op.db")
    graph = ConversationGraph(store, "new")
    assert not store.has_session("new") and store.sessions() == []
    graph.append({"role": "user", "content": "hi"})
    assert [info.id for info in store.sessions()] == ["new"]
