"""Processes opening a new PostgreSQL database at once: the migrations table is made once,
under the migration lock, and no opener fails."""

from __future__ import annotations

import threading
import time
from typing import Any

from sqlalchemy import create_engine, event, text
from sqlalchemy.pool import NullPool

from graph import ConversationGraph, applied_migrations, migrate, registered_migrations


def test_a_second_opener_waits_while_the_first_makes_the_tables(pg_db_url: str) -> None:
    """Before: the migrations table was created outside the lock, so an opener that found
    it missing could collide with another creating it (``relation already exists``)."""
    first, second = create_engine(pg_db_url), create_engine(pg_db_url)
    watcher = create_engine(pg_db_url, poolclass=NullPool)
    errors: list[BaseException] = []
    other = threading.Thread(target=lambda: _run(second, errors))

    def meanwhile(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        # the first opener is about to create the migrations table: start the second and
        # let it get as far as it can (done, or waiting for the lock the first holds)
        creating = statement.lstrip().startswith("CREATE TABLE")
        if creating and "graph_migrations" in statement.split("(")[0] and not other.ident:
            other.start()
            while other.is_alive() and not _waiting_for_a_lock(watcher):
                time.sleep(0.01)

    event.listen(first, "before_cursor_execute", meanwhile)
    try:
        migrate(first)
    finally:
        event.remove(first, "before_cursor_execute", meanwhile)
        other.join(60)
    assert other.ident and not other.is_alive()
    assert errors == []
    assert applied_migrations(first) == registered_migrations()
    for engine in (first, second, watcher):
        engine.dispose()
    graph = ConversationGraph.open(pg_db_url, session="s")
    assert graph.append({"role": "user", "content": "hi"}).seq == 1


def _run(engine: Any, errors: list[BaseException]) -> None:
    try:
        migrate(engine)
    except BaseException as error:
        errors.append(error)


def _waiting_for_a_lock(engine: Any) -> bool:
    with engine.connect() as connection:
        query = text("SELECT count(*) FROM pg_locks WHERE NOT granted")
        return bool(connection.execute(query).scalar())
