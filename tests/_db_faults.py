"""Fault injection for stores, in the style of SQLite's own tests: make the Nth statement
a store sends fail, for N = 1, 2, … until a block runs through, and check after each
failure that the store holds exactly what it held before the block.

A "statement" is what reaches the database: every cursor execution of a SQL store
(``BEGIN`` included) and every bulk COPY on PostgreSQL; for the memory store, every call
of a writing method. The failure is what a refusing database raises (SQLAlchemy's
``OperationalError``), so it travels the same path as a real one.

Self-contained on purpose: the file fault harness lives in ``_faults.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.exc import OperationalError

# internal: faults are injected into the SQL store's row writer
import graph._sql
from graph import MemoryStore, SQLStore, Store, StoreError

MEMORY_WRITES = (
    "ensure_session",
    "commit",
    "update_session_meta",
    "put_values",
    "append_log",
    "put_lease",
    "renew_lease",
    "drop_lease",
    "delete_session",
)


class InjectedFault(StoreError):
    """The memory store's injected failure (a SQL store raises the driver's kind)."""


@dataclass
class Faults:
    """Counts statements; the one numbered ``fail_at`` (1-based) fails."""

    fail_at: int | None = None
    seen: int = 0
    failed: bool = False

    def tick(self, what: str) -> None:
        self.seen += 1
        if self.fail_at is not None and self.seen == self.fail_at:
            self.failed = True
            raise OperationalError(
                what, None, Exception(f"injected fault at statement {self.seen}")
            )


@contextmanager
def failing(store: Store, fail_at: int | None = None) -> Iterator[Faults]:
    """Within the block, the ``fail_at``-th statement of ``store`` fails (``None``: only
    count them)."""
    faults = Faults(fail_at)
    if isinstance(store, SQLStore):
        with _sql_faults(store, faults):
            yield faults
        return
    assert isinstance(store, MemoryStore)
    with _memory_faults(store, faults):
        yield faults


@contextmanager
def _sql_faults(store: SQLStore, faults: Faults) -> Iterator[None]:
    def before(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        faults.tick(statement)

    original = graph._sql.insert_rows

    def insert_rows(connection: Any, insert: str, rows: Any) -> None:
        faults.tick(f"COPY for {insert}")
        original(connection, insert, rows)

    event.listen(store.engine, "before_cursor_execute", before)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(graph._sql, "insert_rows", insert_rows)
        try:
            yield
        finally:
            event.remove(store.engine, "before_cursor_execute", before)


@contextmanager
def _memory_faults(store: MemoryStore, faults: Faults) -> Iterator[None]:
    def wrapped(name: str) -> Any:
        method = getattr(type(store), name)

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                faults.tick(name)
            except OperationalError as error:
                raise InjectedFault(str(error.orig)) from None
            return method(store, *args, **kwargs)

        return call

    with pytest.MonkeyPatch.context() as patch:
        for name in MEMORY_WRITES:
            patch.setattr(store, name, wrapped(name))
        yield
