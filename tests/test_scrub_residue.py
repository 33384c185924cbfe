"""A scrub says what it could not reach: the places the old text may remain (a server's
write-ahead log and archives, replicas, a ``-wal`` file it could not truncate, backups and
copies, exports, spans, prompts already sent) and what an operator does about each; it
never implies the secret is gone."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from graph import dispose_engines
from openprogram import Session
from openprogram.cli import main

SECRET = "hunter2-internal-XQ7Z-9981-correcthorse"

EVERYWHERE = ("copies of the database", "exported", "prompts already sent", "spans")
"""What every report names, whatever the store."""


def _leaky(url: str, state: Path) -> None:
    s = Session(url, "s", state_dir=state, budget=8_000)
    s.graph.append({"role": "user", "content": f"deploy with {SECRET}"})
    s.graph.append({"role": "assistant", "content": f"used {SECRET}"})
    s.engine.render()
    s.close()
    dispose_engines()


def _scrub(capsys: Any, db: str, state: Path, *extra: str) -> dict[str, Any]:
    """``openprogram scrub --json``'s report."""
    base = ["--db", db, "--state-dir", str(state), "scrub", "s", "--pattern", SECRET, *extra]
    assert main([*base, "--json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def _text(capsys: Any, db: str, state: Path, *extra: str) -> str:
    """``openprogram scrub``'s text output (a second scrub, of every known key format)."""
    code = main(["--db", db, "--state-dir", str(state), "scrub", "s", "--known", *extra])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def _names(residues: list[str], *words: str) -> None:
    joined = "\n".join(residues)
    missing = [word for word in words if word not in joined]
    assert not missing, joined


def test_sqlite_says_the_wal_was_truncated_and_what_remains_elsewhere(
    tmp_path: Path, capsys: Any
) -> None:
    db, state = tmp_path / "r.db", tmp_path / "state"
    _leaky(str(db), state)
    report = _scrub(capsys, str(db), state)
    residues = report["residues"]
    _names(residues, f"{db}-wal", "truncated to 0 bytes", *EVERYWHERE, "--state-dir")
    assert not any("could not finish" in line for line in residues)
    out = _text(capsys, str(db), state)
    assert "what the scrub cannot reach" in out
    assert "copies of the database" in out and "-wal" in out


def test_sqlite_says_when_another_connection_kept_the_wal(tmp_path: Path, capsys: Any) -> None:
    db, state = tmp_path / "w.db", tmp_path / "state"
    _leaky(str(db), state)
    reader = sqlite3.connect(db)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM graph_nodes").fetchone()  # holds a snapshot
        report = _scrub(capsys, str(db), state)
    finally:
        reader.close()
    assert report["vacuumed"].startswith("VACUUM (another connection")
    _names(report["residues"], f"{db}-wal", "could not finish", "wal_checkpoint(TRUNCATE)")
    held = db.read_bytes() + Path(f"{db}-wal").read_bytes()
    assert SECRET.encode() in held  # what the report warns of


def test_sqlite_without_vacuum_says_free_pages_keep_it(tmp_path: Path, capsys: Any) -> None:
    db, state = tmp_path / "n.db", tmp_path / "state"
    _leaky(str(db), state)
    report = _scrub(capsys, str(db), state, "--no-vacuum")
    _names(report["residues"], "not vacuumed", "free pages", *EVERYWHERE)


def test_the_library_report_names_the_residues_too(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    s = Session(str(db), "s", state_dir=tmp_path / "state")
    s.graph.append({"role": "user", "content": SECRET})
    report = s.scrub(SECRET)
    _names(list(report.residues), "-wal", *EVERYWHERE)
    s.close()


@pytest.mark.postgres
def test_postgresql_says_its_wal_archive_replicas_and_backups_keep_it(
    pg_db_url: str, tmp_path: Path, capsys: Any
) -> None:
    state = tmp_path / "state"
    _leaky(pg_db_url, state)
    report = _scrub(capsys, pg_db_url, state)
    residues = report["residues"]
    _names(
        residues,
        "pg_wal",
        "CHECKPOINT",
        "pg_switch_wal",
        "archive_mode",
        "replica",
        "base backups",
        *EVERYWHERE,
    )
    assert report["vacuumed"].startswith("VACUUM FULL")
    dispose_engines()
    engine = create_engine(pg_db_url, poolclass=NullPool)
    with engine.connect() as connection:
        datadir = Path(str(connection.execute(text("SHOW data_directory")).scalar()))
    engine.dispose()
    wal = [p for p in (datadir / "pg_wal").iterdir() if p.is_file()]
    assert any(SECRET.encode() in p.read_bytes() for p in wal)  # what the report warns of
    out = _text(capsys, pg_db_url, state, "--no-vacuum")
    assert "what the scrub cannot reach" in out and "pg_wal" in out and "not vacuumed" in out
