"""Deleting a session removes everything we keep for it, not just its nodes."""

from __future__ import annotations

import shutil
from pathlib import Path

from sqlalchemy import delete

from graph import SQLStore, Store, is_safe_id, migrate

from ._errors import ContextError
from ._records import RECORDS, TOKEN_CACHE, records_path


def delete_session(store: Store, session: str, state_dir: Path = Path(".openprogram")) -> None:
    """Delete a session's nodes, compaction records, cached token counts and offload files.

    >>> from graph import MemoryStore
    >>> store = MemoryStore(); _ = store.ensure_session("s1")
    >>> delete_session(store, "s1", Path(".op-doctest")); [s.id for s in store.sessions()]
    []
    """
    if not is_safe_id(session):
        raise ContextError(f"session id {session!r} is not a safe id")
    if isinstance(store, SQLStore):
        migrate(store.engine)
        with store.engine.begin() as connection:
            for table in (RECORDS, TOKEN_CACHE):
                connection.execute(delete(table).where(table.c.session == session))
    store.delete_session(session)
    shutil.rmtree(state_dir / "tool_results" / session, ignore_errors=True)
    records_path(state_dir, session).unlink(missing_ok=True)
