"""``CompactionRecord``: one per new compaction decision, to JSONL, the database, callbacks.

The JSONL file (``<state_dir>/records/<session>.jsonl``) is for people and tools with file
access; the ``context_records`` table is for other hosts. A torn last line (a crash while
writing) is skipped on read with a warning.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
from sqlalchemy import BigInteger, Column, Connection, MetaData, String, Table, Text, select

from graph import is_safe_id, migration

from ._errors import RecordError


class CompactionRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What one compaction decision did."""

    id: str
    session: str
    timestamp: str
    tier: str
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    offloaded: list[dict[str, Any]] = msgspec.field(default_factory=list)
    summarized: int = 0
    preserved: int = 0
    summary: str | None = None
    anchors: dict[str, Any] | None = None
    ratio: float = 1.0
    duration_ms: float = 0.0
    error: str | None = None
    details: dict[str, Any] = msgspec.field(default_factory=dict)


_metadata = MetaData()
RECORDS = Table(
    "context_records",
    _metadata,
    Column("id", String(64), primary_key=True),
    Column("session", String(128), nullable=False, index=True),
    Column("seq", BigInteger, nullable=False),
    Column("tier", String(32), nullable=False),
    Column("body", Text, nullable=False),
)
TOKEN_CACHE = Table(
    "context_token_cache",
    _metadata,
    Column("session", String(128), primary_key=True),
    Column("encoding", String(32), primary_key=True),
    Column("key", String(200), primary_key=True),
    Column("tokens", BigInteger, nullable=False),
)


@migration("context_0001_records")
def _create_records(connection: Connection) -> None:
    RECORDS.create(connection, checkfirst=True)


@migration("context_0002_token_cache")
def _create_token_cache(connection: Connection) -> None:
    TOKEN_CACHE.create(connection, checkfirst=True)


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(CompactionRecord)


def records_path(state_dir: Path, session: str) -> Path:
    if not is_safe_id(session):
        raise RecordError(f"session id {session!r} cannot name a records file")
    return state_dir / "records" / f"{session}.jsonl"


def append_jsonl(path: Path, records: list[CompactionRecord]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as handle:
        for record in records:
            handle.write(_encoder.encode(record) + b"\n")


def read_jsonl(path: Path) -> Iterator[CompactionRecord]:
    """Records in file order; a torn last line is skipped with a warning, others raise."""
    if not path.exists():
        return
    lines = path.read_bytes().split(b"\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield _decoder.decode(line)
        except msgspec.DecodeError as error:
            if index == last:
                warnings.warn(
                    f"{path}:{index + 1}: skipping a torn last record ({error})",
                    RuntimeWarning,
                    stacklevel=2,
                )
                return
            raise RecordError(f"{path}:{index + 1}: not a compaction record: {error}") from error


def insert_records(connection: Connection, records: list[CompactionRecord], seq: int) -> None:
    if records:
        connection.execute(
            RECORDS.insert(),
            [
                {
                    "id": r.id,
                    "session": r.session,
                    "seq": seq,
                    "tier": r.tier,
                    "body": _encoder.encode(r).decode(),
                }
                for r in records
            ],
        )


def select_records(connection: Connection, session: str) -> list[CompactionRecord]:
    rows = connection.execute(
        select(RECORDS.c.body).where(RECORDS.c.session == session).order_by(RECORDS.c.seq)
    ).all()
    return [_decoder.decode(row[0]) for row in rows]
