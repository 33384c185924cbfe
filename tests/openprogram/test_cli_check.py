"""``openprogram check``: every session read as a repair would, and what a damaged
database leaves unreadable said per session, seq and table."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from graph import ConversationGraph, dispose_engines
from openprogram.cli import main


def _session(db: Path) -> list[str]:
    graph = ConversationGraph.open(db, "s")
    ids = [graph.append({"role": "user", "content": f"row-{i}"}).id for i in range(6)]
    graph.close()
    dispose_engines()
    return ids


def _sql(db: Path, statement: str) -> None:
    connection = sqlite3.connect(db)
    connection.execute(statement)
    connection.commit()
    connection.close()


def test_openprogram_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "op.db"
    ids = _session(db)
    ConversationGraph.open(db, "sound").append({"role": "user", "content": "fine"})
    assert main(["--db", str(db), "check"]) == 0
    assert "0 damaged" in capsys.readouterr().out
    dispose_engines()
    _sql(db, "UPDATE graph_nodes SET payload = '{' WHERE seq = 2 AND session = 's'")
    assert main(["--db", str(db), "check"]) == 1
    out = capsys.readouterr().out
    assert "sound: ok (1 node)" in out and "s: " in out and "5 nodes readable" in out
    assert f"seq 2, table graph_nodes: node {ids[1]} does not decode" in " ".join(out.split())
    assert main(["--db", str(db), "check", "sound", "--json"]) == 0
    assert '"damaged": 0' in capsys.readouterr().out
    # reading commands name the damage in one line
    assert main(["--db", str(db), "show", "s"]) == 1
    err = capsys.readouterr().err
    assert "seq 2, table graph_nodes" in err and "openprogram check" in err
    dispose_engines()
