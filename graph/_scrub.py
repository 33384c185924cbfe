"""Scrubbing: removing a secret that is already stored, physically, with an audit entry.

The store is append-only and redaction only helps from now on, so a key that leaked
yesterday needs a sanctioned way out. :func:`scrub` rewrites every stored text of one
session that a pattern matches — node payloads and meta, events (results, finishes,
layers), side values, side logs, the session's meta — to ``[REDACTED:<label>]``, then
rebuilds the database so the old bytes are gone from it too: SQLite's ``VACUUM`` (free
pages included) and a WAL checkpoint that truncates the log, PostgreSQL's ``VACUUM FULL``
of the graph's tables. What was scrubbed is logged in the session's ``audit`` log, by
label and count, never by the secret or the pattern.

Texts are matched as the values they are, not as their JSON (a key with a ``/`` or a
private key's newlines are escaped there), and rewritten with the keys in their order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec
from sqlalchemy import Connection, Table, select, update
from sqlalchemy.exc import SQLAlchemyError

from ._codec import decode_any, encode
from ._errors import GraphError, StoreError
from ._ids import new_id
from ._nodes import Event
from ._protocols import AUDIT
from ._redact import Redactor
from ._residue import ELSEWHERE, postgres_residues, sqlite_residues
from ._schema import EVENTS, LOGS, NODES, SESSIONS, VALUES
from ._sql import SQLStore
from ._store import MemoryStore, Store

_TABLES: tuple[tuple[Table, tuple[str, ...], tuple[str, ...]], ...] = (
    (NODES, ("id",), ("payload", "meta")),
    (EVENTS, ("session", "seq"), ("data",)),
    (VALUES, ("session", "namespace", "key"), ("value",)),
    (LOGS, ("position",), ("body",)),
)


class ScrubReport(msgspec.Struct, frozen=True):
    """What a scrub rewrote: rows per table, files (by path), matches replaced."""

    session: str
    labels: tuple[str, ...]
    rows: dict[str, int]
    files: tuple[str, ...] = ()
    replaced: int = 0
    vacuumed: str = ""
    """How the freed space was cleared (``VACUUM`` …), empty for a memory store."""
    residues: tuple[str, ...] = ()
    """Where the old text may remain, out of the scrub's reach, and what to do about each
    place (a server's write-ahead log, a ``-wal`` file it could not truncate, backups,
    replicas, exports): a scrub never implies the secret is gone everywhere."""

    @property
    def changed(self) -> int:
        return sum(self.rows.values()) + len(self.files)


class Scrubber:
    """A redactor that counts what it replaced (the count goes to the audit entry)."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.replaced = 0

    def text(self, text: str) -> str:
        for kind, pattern in self.redactor.patterns.items():
            marker = f"[REDACTED:{kind}]"
            text, count = pattern.subn(rf"\g<1>{marker}" if pattern.groups else marker, text)
            self.replaced += count
        return text

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                (self.text(k) if isinstance(k, str) else k): self.value(v) for k, v in value.items()
            }
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value

    def stored(self, text: str) -> str:
        """A stored column: JSON rewritten value by value, anything else as text."""
        try:
            value = decode_any(text)
        except msgspec.DecodeError:
            return self.text(text)
        before = self.replaced
        cleaned = self.value(value)
        if self.replaced == before:
            return text
        return msgspec.json.encode(cleaned).decode()


def scrubber(patterns: Mapping[str, str] | Redactor) -> Redactor:
    """A redactor of only ``patterns`` (``{label: regex}``), or the one given."""
    if isinstance(patterns, Redactor):
        return patterns
    if not patterns:
        raise GraphError("scrub needs at least one pattern")
    return Redactor(patterns, defaults=False)


def scrub(
    store: Store,
    session: str,
    patterns: Mapping[str, str] | Redactor,
    *,
    vacuum: bool = True,
    files: tuple[str, ...] = (),
    replaced: int = 0,
) -> ScrubReport:
    """Rewrite what ``patterns`` match in everything ``store`` keeps for ``session``, clear
    the freed space (``vacuum``) and log an audit entry; ``files`` and ``replaced`` add what
    the caller scrubbed outside the store (offload files) to that entry.

    >>> from graph import ConversationGraph
    >>> g = ConversationGraph.memory("s")
    >>> _ = g.append({"role": "user", "content": "my pin is 4321"})
    >>> scrub(g.store, "s", {"pin": r"\\b\\d{4}\\b"}).rows
    {'nodes': 1}
    >>> ConversationGraph(g.store, "s").nodes()[0].payload.content
    'my pin is [REDACTED:pin]'
    """
    if not store.has_session(session):
        raise StoreError(f"no session {session!r} in {store.url}")
    redactor = scrubber(patterns)
    scrubbing = Scrubber(redactor)
    scrubbing.replaced = replaced
    if isinstance(store, SQLStore):
        rows = _scrub_sql(store, session, scrubbing)
        how, residues = _vacuum(store, vacuum)
        residues += ELSEWHERE
    elif isinstance(store, MemoryStore):
        rows, how = _scrub_memory(store, session, scrubbing), ""
        residues = list(ELSEWHERE[1:])
    else:
        raise GraphError(f"scrub does not know how to rewrite a {type(store).__name__}")
    report = ScrubReport(
        session,
        tuple(redactor.patterns),
        rows,
        files,
        scrubbing.replaced,
        vacuumed=how,
        residues=tuple(residues),
    )
    _audit(store, session, report)
    return report


def _audit(store: Store, session: str, report: ScrubReport) -> None:
    body = {
        "action": "scrub",
        "at": datetime.now(UTC).isoformat(),
        "labels": list(report.labels),
        "rows": report.rows,
        "files": list(report.files),
        "replaced": report.replaced,
        "vacuumed": report.vacuumed,
        "residues": list(report.residues),
    }
    seq = max((entry.seq for entry in store.read_log(session, AUDIT)), default=0)
    store.append_log(session, AUDIT, [(new_id(), encode(body))], seq)


def _scrub_sql(store: SQLStore, session: str, scrubbing: Scrubber) -> dict[str, int]:
    rows: dict[str, int] = {}
    with store.transaction(), store._connection() as connection:
        for table, keys, columns in _TABLES:
            changed = 0
            for row in _rows(connection, table, keys, columns, session):
                values = {}
                for column, text in zip(columns, row[len(keys) :], strict=True):
                    cleaned = scrubbing.stored(text)
                    if cleaned != text:
                        values[column] = cleaned
                if values:
                    where = [table.c[key] == row[i] for i, key in enumerate(keys)]
                    connection.execute(update(table).where(*where).values(values))
                    changed += 1
            if changed:
                rows[table.name.removeprefix("graph_")] = changed
        meta = connection.execute(select(SESSIONS.c.meta).where(SESSIONS.c.id == session))
        text = meta.scalar()
        if text is not None and (cleaned := scrubbing.stored(text)) != text:
            connection.execute(
                update(SESSIONS).where(SESSIONS.c.id == session).values(meta=cleaned)
            )
            rows["sessions"] = 1
    return rows


def _rows(
    connection: Connection,
    table: Table,
    keys: tuple[str, ...],
    columns: tuple[str, ...],
    session: str,
) -> Iterator[Any]:
    query = select(*(table.c[name] for name in (*keys, *columns))).where(table.c.session == session)
    yield from connection.execute(query).all()


def _vacuum(store: SQLStore, vacuum: bool) -> tuple[str, list[str]]:
    """Rebuild the database so no free page keeps an old row's bytes (unless ``vacuum`` is
    off); how, and what is left where (see ``_residue``)."""
    engine = store.engine
    try:
        if engine.dialect.name == "sqlite":
            if not vacuum:
                return "", sqlite_residues(engine, vacuumed=False, wal_busy=False)
            raw = engine.raw_connection()
            try:
                cursor = raw.cursor()
                cursor.execute("VACUUM")
                busy = cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                cursor.close()
            finally:
                raw.close()
            left = sqlite_residues(engine, vacuumed=True, wal_busy=bool(busy and busy[0]))
            if busy and busy[0]:
                return "VACUUM (another connection kept the write-ahead log open)", left
            return "VACUUM, wal_checkpoint(TRUNCATE)", left
        tables = ", ".join(table.name for table in (*(t for t, _, _ in _TABLES), SESSIONS))
        if vacuum:
            with engine.connect() as connection:
                auto = connection.execution_options(isolation_level="AUTOCOMMIT")
                auto.exec_driver_sql(f"VACUUM FULL {tables}")
        return (f"VACUUM FULL {tables}" if vacuum else ""), postgres_residues(engine, vacuum)
    except SQLAlchemyError as error:
        raise StoreError(f"scrubbed, but could not vacuum {store.url}: {error}") from error
    except Exception as error:  # the raw DB-API connection raises its own errors
        raise StoreError(f"scrubbed, but could not vacuum {store.url}: {error}") from error


def _scrub_memory(store: MemoryStore, session: str, scrubbing: Scrubber) -> dict[str, int]:
    rows: dict[str, int] = {}
    redactor = scrubbing.redactor

    def note(table: str) -> None:
        rows[table] = rows.get(table, 0) + 1

    with store._lock:
        data = store._sessions[session]
        records = data["records"]
        for index, record in enumerate(records):
            found = record if isinstance(record, Event) else record[0]
            before = msgspec.json.encode(found)
            cleaned = redactor.value(found)
            after = msgspec.json.encode(cleaned)
            if after != before:
                scrubbing.replaced += _markers(after) - _markers(before)
                records[index] = cleaned if isinstance(record, Event) else (cleaned, record[1])
                note("events" if isinstance(record, Event) else "nodes")
        for namespace, values in data.get("values", {}).items():
            if namespace.startswith("\0"):
                continue
            for key, text in list(values.items()):
                if isinstance(text, str) and (cleaned := scrubbing.stored(text)) != text:
                    values[key] = cleaned
                    note("values")
        for log in data.get("logs", {}).values():
            for index, entry in enumerate(log):
                if (cleaned := scrubbing.stored(entry.body)) != entry.body:
                    log[index] = entry._replace(body=cleaned)
                    note("logs")
        meta = scrubbing.value(data["meta"])
        if meta != data["meta"]:
            data["meta"] = meta
            note("sessions")
    return rows


def _markers(data: bytes) -> int:
    return data.count(b"[REDACTED:")
