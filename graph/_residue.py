"""What a scrub cannot reach: where the old text may remain after the rows were rewritten
and the database vacuumed, and what an operator does about each place.

A scrub rewrites rows and rebuilds tables; it cannot rewrite a database server's
write-ahead log, its archive or its replicas, a copy of the file, or what already left the
database (exports, prompts sent to a provider, exported spans). Its report names each place
rather than imply the secret is gone.
"""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

ELSEWHERE = (
    "copies of the database: a backup, a snapshot, a copied file or a dump made before "
    "now holds the old rows: scrub each copy (openprogram --db COPY scrub ...) or delete it",
    "outside the database: files exported before (openprogram export, the viewer's HTML "
    "export), the prompts already sent to the model provider, transcripts the session was "
    "imported or followed from, and OpenTelemetry spans already exported (ids and counts, "
    "but an error's message may quote it) keep what they hold: delete them where they are",
    "another state folder: offload files and JSONL records logs written under another "
    "--state-dir (an earlier one, a copied folder) are not scrubbed: scrub again naming it",
)
"""Where the old text may be whatever the store (kept by every report)."""


def sqlite_residues(engine: Engine, vacuumed: bool, wal_busy: bool) -> list[str]:
    """The SQLite file's own residues after ``VACUUM`` and a truncating checkpoint."""
    database = engine.url.database or ""
    wal = Path(f"{database}-wal")
    if not vacuumed:
        return [
            f"free pages: not vacuumed (--no-vacuum): free pages of {database} and its "
            f"write-ahead log {wal} still hold the old rows: scrub again without "
            f"--no-vacuum, or run: sqlite3 {database} 'VACUUM; PRAGMA wal_checkpoint(TRUNCATE)'"
        ]
    found: list[str] = []
    size = _size(wal)
    if wal_busy or size:
        found.append(
            f"database file and write-ahead log: the checkpoint could not finish (another "
            f"connection keeps the database open), so the old pages may remain in {database} "
            f"and {wal} is not truncated ({size:,} bytes): once every other process has "
            f"closed the database, run: sqlite3 {database} 'PRAGMA wal_checkpoint(TRUNCATE)' "
            "(or scrub again)"
        )
    else:
        found.append(
            f"write-ahead log: {wal} was checkpointed and truncated to 0 bytes; the file "
            "system may keep freed blocks until reused (its snapshots keep them)"
        )
    return found


def postgres_residues(engine: Engine, vacuumed: bool) -> list[str]:
    """What the server keeps of the old rows that no SQL statement rewrites: its WAL, the
    WAL archive, replicas, base backups (and, not ``vacuumed``, the dead row versions in
    the table files). A ``CHECKPOINT`` is tried (it needs superuser or ``pg_checkpoint``)
    so older WAL segments can be recycled sooner."""
    checkpoint = _checkpoint(engine)
    archive = _setting(engine, "SHOW archive_mode")
    slots = _setting(engine, "SELECT count(*) FROM pg_replication_slots")
    replicas = _setting(engine, "SELECT count(*) FROM pg_stat_replication")
    found = [
        "write-ahead log: pg_wal/ in the server's data directory still holds the old rows "
        f"(a scrub rewrites tables, never the log); {checkpoint}. The server recycles "
        "segments from before a checkpoint as newer WAL fills them (max_wal_size, "
        "wal_keep_size); to hurry it, a superuser runs SELECT pg_switch_wal(); CHECKPOINT; "
        "until no segment from before the scrub is left in pg_wal"
        + (
            f"; {slots} replication slot(s) retain WAL until their consumers catch up or "
            "the slots are dropped"
            if slots not in ("", "0")
            else ""
        ),
        "WAL archive and point-in-time recovery: "
        + (
            "archive_mode is on: archived segments hold the old rows, and a recovery to a "
            "time before the scrub brings them back: delete or restrict archived segments "
            "and base backups from before now"
            if archive in ("on", "always")
            else f"archive_mode is {archive or 'unknown'} here; a PITR archive kept by a "
            "backup tool (pgBackRest, Barman, WAL-G) still holds segments from before now"
        ),
        "replicas: "
        + (
            f"{replicas} streaming replica(s) replay the scrub but keep the old rows in their "
            "own pg_wal and archives: treat them like this server"
            if replicas not in ("", "0")
            else "none streaming now; a standby, a logical replica or a replica that is "
            "disconnected holds the old rows until it replays the scrub, and its WAL after"
        ),
        "base backups and dumps (pg_basebackup, pg_dump, snapshots) taken before now hold "
        "the old rows: delete them, or restore, scrub and back up again",
    ]
    if not vacuumed:
        found.insert(
            0,
            "table files: not vacuumed (--no-vacuum): dead row versions in the graph_* "
            "tables' files hold the old rows until a VACUUM FULL rewrites them: scrub "
            "again without --no-vacuum",
        )
    return found


def _checkpoint(engine: Engine) -> str:
    try:
        with engine.connect() as connection:
            auto = connection.execution_options(isolation_level="AUTOCOMMIT")
            auto.exec_driver_sql("CHECKPOINT")
    except SQLAlchemyError:
        return "a CHECKPOINT was refused to this role (it needs superuser or pg_checkpoint)"
    return "a CHECKPOINT ran after the rewrite"


def _setting(engine: Engine, query: str) -> str:
    with suppress(SQLAlchemyError), engine.connect() as connection:
        found = connection.execute(text(query)).scalar()
        return "" if found is None else str(found)
    return ""


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
