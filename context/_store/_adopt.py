"""Adopting a state folder on purpose: what a refused copy (``CopiedDatabase``) does next.

Two ways, both recorded in the folder's history (``_owner.HISTORY``):

- re-key: the copy becomes a database of its own, with a new UUID. A folder that was its
  own already (its default one, copied along with it) comes along; its original's folder
  is left to the original, and the copy writes into its own default folder from then on;
- take over: the folder serves this file from now on, and the file it served before is
  the one refused (a folder serves one file; it is never shared).

``openprogram adopt-state [--rekey]`` runs it from the command line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from graph import SQLStore, Store

from .._errors import ForeignStateFolder, StateDirError
from ._folder import StateFolder, default_path, state_folder
from ._owner import checked_id, owner_of, record, sqlite_file


@dataclass(frozen=True)
class Adoption:
    """What :func:`adopt_state_folder` did."""

    folder: Path
    """The state folder the database uses from now on."""
    database: str
    """Its UUID now."""
    owner: str | None = None
    """The database file the folder serves (None: not a SQLite file)."""
    previous_database: str | None = None
    """Its UUID before a re-key (None: not re-keyed)."""
    previous_owner: str | None = None
    """The file the folder served before it was taken over (None: none, or itself)."""
    left: Path | None = None
    """A folder left to the database it serves (a re-keyed copy's original's)."""


def adopt_state_folder(
    store: Store, state_dir: str | os.PathLike[str] | None = None, *, rekey: bool = False
) -> Adoption:
    """Make ``state_dir`` (or the database's default folder) this database's on purpose:
    ``rekey`` gives the database a new UUID (a copy becomes its own database); without it
    the folder is taken over. Refused for a folder that serves another database's UUID."""
    if rekey:
        return _rekeyed(store, state_dir)
    database = checked_id(store.database_id(), store.url)
    if database is None:
        raise StateDirError(f"{store.url} has no database UUID yet; open it for writing first")
    file = sqlite_file(store.url)
    path = Path(state_dir) if state_dir is not None else default_path(store.url, database)
    if path is None:
        raise StateDirError("an in-memory store has only its temporary folder")
    chosen = StateFolder(path, database, file=file)
    served, before = chosen.marker()
    if served is not None and served != database:
        raise ForeignStateFolder(
            f"state folder {path} serves database {served}, not this one ({database}); only "
            "a folder serving this database's UUID (its copy's original's) can be taken over"
        )
    mine = _real(file)
    if served is None or file is None:
        chosen.claim()
        return Adoption(path, database, mine)
    now = owner_of(file, path)
    if before is not None and now is not None and before.same_file(now):
        chosen.claim()
        return Adoption(path, database, mine)
    chosen.own("taken over")
    return Adoption(path, database, mine, previous_owner=before.path if before else None)


def _real(file: Path | None) -> str | None:
    return os.path.realpath(file) if file is not None else None


def _rekeyed(store: Store, state_dir: str | os.PathLike[str] | None) -> Adoption:
    if not isinstance(store, SQLStore):
        raise StateDirError(f"{store.url}: only a SQL database keeps a UUID to change")
    old = store.database_id()
    file = sqlite_file(store.url)
    path = Path(state_dir) if state_dir is not None else None
    if path is None and file is not None:
        path = default_path(store.url, None)
    left: Path | None = None
    comes_along = False
    if path is not None:
        chosen = StateFolder(path, old, file=file)
        try:
            chosen.check()
        except ForeignStateFolder:
            left = path
        else:
            comes_along = old is not None and chosen.served() == old
    new = store.rekey()
    if comes_along and path is not None:
        folder = StateFolder(path, new, file=file)
        folder.own("named")
        record(path, "rekeyed", new, old, new)
        return Adoption(path, new, _real(file), previous_database=old)
    if left is not None or path is None:
        fresh = default_path(store.url, new)  # a SQLite file's may be the folder left
        if fresh is None:
            fresh = state_folder(store).path
        return Adoption(fresh, new, _real(file), previous_database=old, left=left)
    return Adoption(path, new, _real(file), previous_database=old)
