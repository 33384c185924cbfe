"""Connections: a database URL from what a user gives, and one migrated engine per URL.

SQLite runs in WAL mode with a busy timeout and takes its write lock at ``BEGIN`` (so two
writers queue instead of failing on upgrade); PostgreSQL pings pooled connections.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect
from sqlalchemy.exc import SQLAlchemyError

from ._errors import StoreError
from ._migrations import forget_engine, migrate
from ._store import DEFAULT_PATH
from ._url import StoreURL


def normalize_url(url_or_path: str | os.PathLike[str] | None, *, create: bool = True) -> str:
    """A SQLAlchemy URL from a URL, a file path, ``OPENPROGRAM_DB`` or the default path.

    With ``create=False`` a SQLite file that does not exist is a :class:`NoDatabase`, and
    no folder is made for it (readers never create a database).
    """
    if url_or_path is None:
        url_or_path = os.environ.get("OPENPROGRAM_DB") or DEFAULT_PATH
    return StoreURL.parse(url_or_path).connection(create=create)


_ENGINES: dict[str, Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _sqlite_begin(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def _sqlite_read_only(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _sqlite_begin_reading(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN")


def read_only_url(url: str) -> str:
    """The URL SQLAlchemy opens for reading only (see :meth:`StoreURL.read_only`)."""
    return StoreURL.parse(url).read_only()


def engine_for(url: str, *, read_only: bool = False) -> Engine:
    """One migrated engine per URL and process; ``read_only``: one that never writes, so
    it runs no migration (a reader of an older database says what it predates instead)."""
    key = f"{url}#read-only" if read_only else url
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is not None:
            return engine
        try:
            if StoreURL.parse(url).family == "sqlite":
                engine = create_engine(
                    read_only_url(url) if read_only else url,
                    connect_args={"check_same_thread": False},
                )
                event.listen(engine, "connect", _sqlite_read_only if read_only else _sqlite_pragmas)
                event.listen(engine, "begin", _sqlite_begin_reading if read_only else _sqlite_begin)
            elif read_only:
                engine = create_engine(
                    url, pool_pre_ping=True, execution_options={"postgresql_readonly": True}
                )
            else:
                engine = create_engine(url, pool_pre_ping=True)
        except SQLAlchemyError as error:
            raise StoreError(f"cannot open database {url}: {error}") from error
        if read_only:
            try:
                ours = inspect(engine).has_table("graph_sessions")
            except SQLAlchemyError as error:
                engine.dispose()
                text = " ".join(str(getattr(error, "orig", None) or error).split())
                raise StoreError(f"cannot open database {url}: {text}") from error
            if not ours:
                engine.dispose()
                raise StoreError(
                    f"cannot open database {url}: it has no graph tables (it predates "
                    "migration graph_0001_initial, or is not an openprogram database)"
                )
            _ENGINES[key] = engine
            return engine
        try:
            migrate(engine)
        except BaseException as error:
            engine.dispose()  # an engine we do not cache must not leak its connections
            if isinstance(error, SQLAlchemyError):
                raise StoreError(f"cannot open database {url}: {error}") from error
            raise
        _ENGINES[key] = engine
        return engine


def dispose_engines() -> None:
    """Close every cached engine (tests and short-lived CLIs call this)."""
    with _ENGINES_LOCK:
        for engine in _ENGINES.values():
            forget_engine(engine)
            engine.dispose()
        _ENGINES.clear()
