"""Connections: a database URL from what a user gives, and one migrated engine per URL.

SQLite runs in WAL mode with a busy timeout and takes its write lock at ``BEGIN`` (so two
writers queue instead of failing on upgrade); PostgreSQL pings pooled connections.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import SQLAlchemyError

from ._errors import StoreError
from ._migrations import forget_engine, migrate
from ._store import DEFAULT_PATH


def normalize_url(url_or_path: str | os.PathLike[str] | None, *, create: bool = True) -> str:
    """A SQLAlchemy URL from a URL, a file path, ``OPENPROGRAM_DB`` or the default path.

    With ``create=False`` a SQLite file that does not exist is a :class:`StoreError`, and
    no folder is made for it (readers never create a database).
    """
    if url_or_path is None:
        url_or_path = os.environ.get("OPENPROGRAM_DB") or DEFAULT_PATH
    text = os.fspath(url_or_path)
    if text.startswith(("postgres://", "postgresql://")):
        return "postgresql+psycopg://" + text.split("://", 1)[1]
    if "://" in text:
        if not create and text.startswith("sqlite:///") and not Path(text[10:]).exists():
            raise StoreError(f"no database at {text[10:]}")
        return text
    path = Path(text).expanduser().resolve()
    if not create:
        if not path.is_file():
            raise StoreError(f"no database at {path}")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


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


def engine_for(url: str) -> Engine:
    """One migrated engine per URL and process."""
    with _ENGINES_LOCK:
        engine = _ENGINES.get(url)
        if engine is not None:
            return engine
        try:
            if url.startswith("sqlite"):
                engine = create_engine(url, connect_args={"check_same_thread": False})
                event.listen(engine, "connect", _sqlite_pragmas)
                event.listen(engine, "begin", _sqlite_begin)
            else:
                engine = create_engine(url, pool_pre_ping=True)
        except SQLAlchemyError as error:
            raise StoreError(f"cannot open database {url}: {error}") from error
        try:
            migrate(engine)
        except BaseException as error:
            engine.dispose()  # an engine we do not cache must not leak its connections
            if isinstance(error, SQLAlchemyError):
                raise StoreError(f"cannot open database {url}: {error}") from error
            raise
        _ENGINES[url] = engine
        return engine


def dispose_engines() -> None:
    """Close every cached engine (tests and short-lived CLIs call this)."""
    with _ENGINES_LOCK:
        for engine in _ENGINES.values():
            forget_engine(engine)
            engine.dispose()
        _ENGINES.clear()
