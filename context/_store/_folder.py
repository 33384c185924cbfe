"""The state folder: where a database's offloaded outputs and records logs live.

A state folder belongs to one database. The database carries a UUID (made once and stored
in it, see ``Store.database_id``); the folder carries a marker file, ``MARKER``, naming the
UUID of the database it serves. A folder whose marker names another database is refused
with :class:`ForeignStateFolder`, so two databases used from one working folder never
share, overwrite or garbage-collect each other's files. A SQLite file's marker also names
the file (``_owner``): a copy of it (``cp agent.db experiment.db``, the same UUID) is
refused its original's folder with :class:`CopiedDatabase`; a moved one keeps it.

Where the folder is, unless the caller names one (``Session(state_dir=...)``,
``ContextEngine(state_dir=...)``, ``--state-dir``):

- a SQLite file ``agent.db``: ``agent.db.state/`` beside it;
- PostgreSQL (or any other URL): ``<root>/<database UUID>/`` on this host, the root being
  ``$OPENPROGRAM_STATE_HOME`` or ``$XDG_DATA_HOME/openprogram/databases`` (by default
  ``~/.local/share/openprogram/databases``). A database used from many hosts has one folder
  on each; what is in them stays readable from any host through the store;
- an in-memory store: a temporary folder, removed when the store is released
  (``Session.close``) or garbage-collected.

Nothing here writes until :meth:`StateFolder.claim`: readers resolve and check, writers
claim (make the folder and its marker) before their first file.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
import tempfile
import threading
import uuid
import weakref
from pathlib import Path
from typing import Any

from graph import SideData, StoreURL

from .._errors import ForeignStateFolder, StateDirError
from ._owner import SUFFIX, Owner, checked_id, decode, encode, judge, owner_of, record, sqlite_file

MARKER = ".openprogram-database"
"""The marker file: the UUID of the database the folder serves on its first line, and for
a SQLite file the file and folder it was written for on the second (``_owner``)."""
STATE_HOME = "OPENPROGRAM_STATE_HOME"
_MARKER_LIMIT = 4096


class StateFolder:
    """One database's state folder: its path, the database it serves, and whether it is a
    temporary one (an in-memory store's) to remove on release."""

    def __init__(
        self,
        path: Path,
        database: str | None,
        *,
        temporary: bool = False,
        file: Path | None = None,
    ) -> None:
        self.path = path
        self.database = database
        self.temporary = temporary
        self.file = file
        """The SQLite file the folder serves (None: another kind of database)."""
        self._claimed = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"StateFolder({str(self.path)!r}, database={self.database!r})"

    def served(self) -> str | None:
        """The UUID the folder's marker names (None: no marker, or no folder yet)."""
        return self.marker()[0]

    def marker(self) -> tuple[str | None, Owner | None]:
        """The UUID and the owning file the folder's marker names (None: not named).

        The marker is opened without blocking and checked to be a regular file: a FIFO
        (or a link, a device) planted in its place is refused at once, in one line,
        instead of hanging every open of the database."""
        marker = self.path / MARKER
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            handle = os.open(marker, flags)
        except (FileNotFoundError, NotADirectoryError):
            return None, None
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise StateDirError(f"{marker} is a symlink; refusing to follow it") from error
            raise StateDirError(f"cannot read {marker}: {error.strerror}") from error
        try:
            if not stat.S_ISREG(os.fstat(handle).st_mode):
                raise StateDirError(
                    f"{marker} is not a regular file (a FIFO or device?); refusing it: "
                    "remove it and the folder's database writes it again"
                )
            data = os.read(handle, _MARKER_LIMIT)
        except OSError as error:
            raise StateDirError(f"cannot read {marker}: {error.strerror}") from error
        finally:
            os.close(handle)
        return decode(data.decode("utf-8", "replace"))

    def check(self) -> str | None:
        """Refuse a folder that serves another database, or another file holding this
        database's UUID (a copy); reading never writes a marker. What the first writer
        writes down (``_owner.judge``): None when the marker is current."""
        served, owner = self.marker()
        if served is None or self.database is None:
            return None
        if served != self.database:
            raise ForeignStateFolder(
                f"state folder {self.path} serves database {served}, not this one "
                f"({self.database}); give this database its own folder (state_dir= or "
                "--state-dir), or leave it out for the default beside the database"
            )
        if self.file is None:
            return None
        return judge(self.path, self.database, self.file, owner)

    def claim(self) -> Path:
        """Make the folder and its marker (once); the path to write under. A marker that
        does not name this file yet (a moved database, a folder copied along with it, a
        marker from before) is brought up to date, and a move or a copy is recorded."""
        if self._claimed:
            return self.path
        with self._lock:
            if self._claimed:
                return self.path
            self.check()
            try:
                self.path.mkdir(0o700 if self.temporary else 0o777, parents=True, exist_ok=True)
                if self.database is not None and self.served() is None:
                    _write_marker(self.path, encode(self.database, self._owner()))
            except OSError as error:
                raise StateDirError(f"cannot make the state folder {self.path}: {error}") from error
            change = self.check()  # another process may have claimed it first
            if change is not None:
                self.own(change)
            self._claimed = True
        return self.path

    def settle(self) -> None:
        """Bring an existing marker up to date without making anything (``delete`` and
        ``gc`` write by removing: a move they are the first to see is recorded too)."""
        with self._lock:
            change = self.check()
            if change is not None:
                self.own(change)

    def own(self, event: str) -> None:
        """Write this database (and its file) into the marker, and record ``event`` unless
        it only names the file (``named``)."""
        owner = self._owner()
        if self.database is None or (self.file is not None and owner is None):
            return  # nothing to name: no UUID, or the file is gone meanwhile
        before = self.marker()[1]
        try:
            _replace_marker(self.path, encode(self.database, owner))
        except OSError as error:
            raise StateDirError(f"cannot update {self.path / MARKER}: {error}") from error
        if event != "named" and owner is not None:
            record(self.path, event, self.database, before.path if before else None, owner.path)

    def _owner(self) -> Owner | None:
        return owner_of(self.file, self.path) if self.file is not None else None

    def relative(self, path: Path) -> str:
        """``path`` as a prompt names it: relative to the folder, the same on every host."""
        return path.relative_to(self.path).as_posix()

    def release(self) -> None:
        """Remove a temporary folder (a no-op for a database's real one)."""
        if self.temporary:
            shutil.rmtree(self.path, ignore_errors=True)
            self._claimed = False


def _write_marker(folder: Path, text: str, *, replace: bool = False) -> None:
    temporary = folder / f"{MARKER}.{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    handle = os.open(temporary, flags, 0o644)
    try:
        try:
            os.write(handle, text.encode("utf-8"))
        finally:
            os.close(handle)
        if replace:
            os.replace(temporary, folder / MARKER)
        else:
            os.link(temporary, folder / MARKER)  # never replaces a marker another writer made
    except FileExistsError:
        pass
    finally:
        temporary.unlink(missing_ok=True)


def _replace_marker(folder: Path, text: str) -> None:
    _write_marker(folder, text, replace=True)


def state_home() -> Path:
    """This host's registry of state folders by database UUID (for server databases)."""
    root = os.environ.get(STATE_HOME)
    if root:
        return Path(root).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or str(Path("~/.local/share").expanduser())
    return Path(data) / "openprogram" / "databases"


def default_path(url: str, database: str | None) -> Path | None:
    """Where a database's state folder is by default (None: an in-memory store's)."""
    address = StoreURL.parse(url)
    file = address.file
    if file is not None:
        return file.with_name(file.name + SUFFIX)
    if address.in_memory or database is None:
        return None
    return state_home() / str(checked_id(database, url))


_TEMPORARY: weakref.WeakKeyDictionary[SideData, StateFolder] = weakref.WeakKeyDictionary()
_TEMPORARY_LOCK = threading.Lock()


def state_folder(
    store: SideData | None, override: str | os.PathLike[str] | None = None
) -> StateFolder:
    """The state folder of ``store``'s database (``override``: the caller's choice),
    checked against its marker. Writes nothing; :meth:`StateFolder.claim` does.

    >>> from graph import MemoryStore
    >>> folder = state_folder(MemoryStore())
    >>> folder.temporary, folder.path.exists()
    (True, False)
    >>> folder.claim().is_dir()
    True
    >>> folder.release(); folder.path.exists()
    False
    """
    database = _database_of(store)
    file = sqlite_file(store.url) if store is not None else None
    if override is not None:
        found = StateFolder(Path(override), database, file=file)
    else:
        path = default_path(store.url, database) if store is not None else None
        found = StateFolder(path, database, file=file) if path is not None else _temporary(store)
    found.check()
    return found


def _database_of(store: SideData | None) -> str | None:
    """The store's database UUID, refused unless it has the form we write (it names a
    folder, and a line of the marker)."""
    if store is None:
        return None
    return checked_id(store.database_id(), store.url)


def _temporary(store: SideData | None) -> StateFolder:
    if store is None:
        return _made(None)
    with _TEMPORARY_LOCK:
        found = _TEMPORARY.get(store)
        if found is None:
            found = _TEMPORARY[store] = _made(store)
        return found


def _made(store: SideData | None) -> StateFolder:
    """A temporary folder's place (made by the first write, so a store that never
    offloads costs no folder)."""
    path = Path(tempfile.gettempdir()) / f"openprogram-state-{uuid.uuid4().hex}"
    folder = StateFolder(path, _database_of(store), temporary=True)
    owner: Any = store if store is not None else folder
    weakref.finalize(owner, shutil.rmtree, path, True)
    return folder


def release_state_folder(store: SideData) -> None:
    """Remove an in-memory store's temporary state folder now (``Session.close``)."""
    with _TEMPORARY_LOCK:
        found = _TEMPORARY.pop(store, None)
    if found is not None:
        found.release()
