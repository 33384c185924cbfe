"""A database as every front end opens it: its store, its state folder, a session in it.

Reading opens what exists and never creates anything — no database file, no session, no
state folder; a folder that does not exist is never created behind the user's back (only
the default ``.openprogram`` folder is)."""

from __future__ import annotations

import os
from pathlib import Path

from context import StateFolder, state_folder
from graph import ConversationGraph, Store, StoreURL
from graph import open_store as graph_open_store
from openprogram._errors import SessionError, UsageError

__all__ = ["find_session", "folder_of", "open_store"]


def open_store(db: str | None, *, create: bool, read_only: bool = False) -> Store:
    """The database ``db`` names (None: ``$OPENPROGRAM_DB`` or the default), opened by
    ``graph.open_store`` after checking what only a user's option can get wrong (a folder,
    a missing parent folder); ``create=False`` refuses one that does not exist and
    ``read_only`` opens it so that nothing is written or migrated."""
    if db:
        path = StoreURL.parse(str(db)).file
        if path is not None and path.is_dir():
            raise UsageError(
                f"--db {db} is a folder; name a database file, e.g. {path / 'openprogram.db'}"
            )
        if path is not None and create and not path.parent.is_dir():
            raise UsageError(f"--db {db}: there is no folder {path.parent}; create it first")
    return graph_open_store(db, create=create, read_only=read_only)


def folder_of(store: Store, state_dir: str | os.PathLike[str] | None = None) -> StateFolder:
    """The state folder of ``store``'s database (or ``state_dir``), checked: a folder that
    serves another database is refused."""
    return state_folder(store, Path(state_dir) if state_dir else None)


def find_session(store: Store, session: str) -> ConversationGraph:
    """A session that must exist in ``store`` (finding never creates one)."""
    if not store.has_session(session):
        raise SessionError(
            f"no session {session!r} in {store.url}; `openprogram sessions` lists them"
        )
    return ConversationGraph(store, session)
