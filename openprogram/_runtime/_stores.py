"""The files of an old shared ``./.openprogram`` folder, copied into a database's own
state folder (stores themselves are opened by ``graph.open_store``, the one registry).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from context import ContextError, StateFolder, migrate_state
from graph import MemoryStore, Store, StoreError

OLD_FOLDER = Path(".openprogram")
"""The state folder every database shared before each had its own."""


def migrate_old_files(store: Store, folder: StateFolder, session: str) -> None:
    """The first writing open copies the session's files out of an old shared
    ``./.openprogram`` (``context.migrate_state``); never fatal to opening."""
    if isinstance(store, MemoryStore) or not OLD_FOLDER.is_dir():
        return
    with contextlib.suppress(OSError, ContextError, StoreError):
        migrate_state(store, folder, OLD_FOLDER, [session])
