"""``fork`` makes a named branch and leaves the session where it was; ``checkout`` moves the
session, keeping where it was as a branch, so every move can be undone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graph import ConversationGraph, SQLStore, dispose_engines
from openprogram.cli import main


def _session(db: Path) -> list[str]:
    g = ConversationGraph(SQLStore(db), "s")
    ids = []
    for turn in range(6):
        ids.append(g.append({"role": "user", "content": f"question {turn} " * 40}).id)
        ids.append(g.append({"role": "assistant", "content": f"answer {turn} " * 40}).id)
    dispose_engines()
    return ids


def _tokens(db: Path, capsys: pytest.CaptureFixture[str]) -> int:
    assert main(["--db", str(db), "context", "s", "--json"]) == 0
    return int(json.loads(capsys.readouterr().out)["next"]["tokens"])


def _head(db: Path) -> str | None:
    head = ConversationGraph(SQLStore(db), "s").head
    dispose_engines()
    return head


def test_fork_leaves_the_session_where_it_was_and_checkout_can_go_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "b.db"
    ids = _session(db)
    whole = _tokens(db, capsys)
    assert main(["--db", str(db), "fork", "s", ids[3]]) == 0
    assert "branch fork-1 starts at" in capsys.readouterr().out
    assert _head(db) == ids[-1] and _tokens(db, capsys) == whole  # nothing moved
    assert main(["--db", str(db), "show", "s", "--json"]) == 0
    branches = json.loads(capsys.readouterr().out)["branches"]
    assert branches == {"main": ids[-1], "fork-1": ids[3]}

    assert main(["--db", str(db), "checkout", "s", "fork-1"]) == 0
    out = capsys.readouterr().out
    assert f"main is now at {ids[3]}" in out and "kept as branch main-1" in out
    assert _head(db) == ids[3] and _tokens(db, capsys) < whole

    assert main(["--db", str(db), "checkout", "s", "main-1"]) == 0
    capsys.readouterr()
    assert _head(db) == ids[-1] and _tokens(db, capsys) == whole  # back, exactly

    assert main(["--db", str(db), "fork", "s", ids[1], "--name", "fork-1"]) == 1
    assert "exists" in capsys.readouterr().err
    assert main(["--db", str(db), "checkout", "s", "nowhere"]) == 1
    assert "neither a branch" in capsys.readouterr().err
    dispose_engines()
