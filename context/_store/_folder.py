"""The state folder: where a database's offloaded outputs and records logs live.

A state folder belongs to one database. The database carries a UUID (made once and stored
in it, see ``Store.database_id``); the folder carries a marker file, ``MARKER``, naming the
UUID of the database it serves. A folder whose marker names another database is refused
with :class:`ForeignStateFolder`, so two databases used from one working folder never
share, overwrite or garbage-collect each other's files.

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

from graph import SideData

from .._errors import ForeignStateFolder, StateDirError

MARKER = ".openprogram-database"
"""The marker file: the UUID of the database the folder serves, on one line."""
STATE_HOME = "OPENPROGRAM_STATE_HOME"
SUFFIX = ".state"
_MARKER_LIMIT = 4096


class StateFolder:
    """One database's state folder: its path, the database it serves, and whether it is a
    temporary one (an in-memory store's) to remove on release."""

    def __init__(self, path: Path, database: str | None, *, temporary: bool = False) -> None:
        self.path = path
        self.database = database
        self.temporary = temporary
        self._claimed = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"StateFolder({str(self.path)!r}, database={self.database!r})"

    def served(self) -> str | None:
        """The UUID the folder's marker names (None: no marker, or no folder yet).

        The marker is opened without blocking and checked to be a regular file: a FIFO
        (or a link, a device) planted in its place is refused at once, in one line,
        instead of hanging every open of the database."""
        marker = self.path / MARKER
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            handle = os.open(marker, flags)
        except (FileNotFoundError, NotADirectoryError):
            return None
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
        return data.decode("utf-8", "replace").strip() or None

    def check(self) -> None:
        """Refuse a folder that serves another database (reading never writes a marker)."""
        served = self.served()
        if served is not None and self.database is not None and served != self.database:
            raise ForeignStateFolder(
                f"state folder {self.path} serves database {served}, not this one "
                f"({self.database}); give this database its own folder (state_dir= or "
                "--state-dir), or leave it out for the default beside the database"
            )

    def claim(self) -> Path:
        """Make the folder and its marker (once); the path to write under."""
        if self._claimed:
            return self.path
        with self._lock:
            if self._claimed:
                return self.path
            self.check()
            try:
                self.path.mkdir(0o700 if self.temporary else 0o777, parents=True, exist_ok=True)
                if self.database is not None and self.served() is None:
                    _write_marker(self.path, self.database)
            except OSError as error:
                raise StateDirError(f"cannot make the state folder {self.path}: {error}") from error
            self.check()  # another process may have claimed it first
            self._claimed = True
        return self.path

    def relative(self, path: Path) -> str:
        """``path`` as a prompt names it: relative to the folder, the same on every host."""
        return path.relative_to(self.path).as_posix()

    def release(self) -> None:
        """Remove a temporary folder (a no-op for a database's real one)."""
        if self.temporary:
            shutil.rmtree(self.path, ignore_errors=True)
            self._claimed = False


def _write_marker(folder: Path, database: str) -> None:
    temporary = folder / f"{MARKER}.{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    handle = os.open(temporary, flags, 0o644)
    try:
        try:
            os.write(handle, (database + "\n").encode("utf-8"))
        finally:
            os.close(handle)
        os.link(temporary, folder / MARKER)  # never replaces a marker another writer made
    except FileExistsError:
        pass
    finally:
        temporary.unlink(missing_ok=True)


def state_home() -> Path:
    """This host's registry of state folders by database UUID (for server databases)."""
    root = os.environ.get(STATE_HOME)
    if root:
        return Path(root).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or str(Path("~/.local/share").expanduser())
    return Path(data) / "openprogram" / "databases"


def default_path(url: str, database: str | None) -> Path | None:
    """Where a database's state folder is by default (None: an in-memory store's)."""
    if url.startswith("sqlite:///"):
        file = Path(url.removeprefix("sqlite:///"))
        return file.with_name(file.name + SUFFIX)
    if url.startswith("memory") or database is None:
        return None
    return state_home() / database


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
    database = store.database_id() if store is not None else None
    if override is not None:
        found = StateFolder(Path(override), database)
    else:
        path = default_path(store.url, database) if store is not None else None
        found = StateFolder(path, database) if path is not None else _temporary(store)
    found.check()
    return found


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
    folder = StateFolder(path, store.database_id() if store is not None else None, temporary=True)
    owner: Any = store if store is not None else folder
    weakref.finalize(owner, shutil.rmtree, path, True)
    return folder


def release_state_folder(store: SideData) -> None:
    """Remove an in-memory store's temporary state folder now (``Session.close``)."""
    with _TEMPORARY_LOCK:
        found = _TEMPORARY.pop(store, None)
    if found is not None:
        found.release()
