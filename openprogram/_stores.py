"""Where sessions live: a store opened from a path, URL or ``":memory:"``, and the files of
an old shared ``./.openprogram`` folder copied into a database's own state folder.

Kept apart from ``Session`` because the CLI and the demo open stores without a session.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from context import ContextError, StateFolder, migrate_state
from graph import MemoryStore, SQLStore, Store, StoreError

MEMORY = ":memory:"
OLD_FOLDER = Path(".openprogram")
"""The state folder every database shared before each had its own."""


def open_store(db: str | os.PathLike[str] | Store | None) -> Store:
    """A store from a path or URL (``None``: ``$OPENPROGRAM_DB`` or the default file)."""
    if isinstance(db, Store):
        return db
    if db == MEMORY:
        return MemoryStore()
    return SQLStore(db)


def migrate_old_files(store: Store, folder: StateFolder, session: str) -> None:
    """The first writing open copies the session's files out of an old shared
    ``./.openprogram`` (``context.migrate_state``); never fatal to opening."""
    if isinstance(store, MemoryStore) or not OLD_FOLDER.is_dir():
        return
    with contextlib.suppress(OSError, ContextError, StoreError):
        migrate_state(store, folder, OLD_FOLDER, [session])
