"""Which database file a state folder serves: a copy of a SQLite file is another database.

A SQLite file keeps its UUID inside, so ``cp agent.db experiment.db`` copies it too: the UUID
alone cannot tell a copy from its original, and the inode alone would refuse a moved or a
restored original. So the marker also names the file that owns the folder (its real path
and its (device, inode)) and the folder itself (its real path and (device, inode)). A file
opening a folder whose marker names its UUID is:

- the recorded file (the same real path, or another name of the same file): the folder is
  its own;
- another file, where the folder was copied along with it (the recorded folder is still in
  its place, and this is another one: a whole project copied): this copy of the folder is
  the copy's;
- another file, while the recorded path still holds a database with that UUID: a copy,
  refused like a foreign folder (:class:`CopiedDatabase`), with the way to adopt it;
- another file otherwise: the database moved (its old path holds no such database now).

The first writer after a move or a copied folder updates the marker and records the change
(``HISTORY``, one JSON line each; so does an adoption). A marker from before (the UUID alone)
is read by path: a file's default folder (``agent.db.state``) is that file's, and another
folder ``X.state`` is the file ``X``'s when ``X`` still holds the UUID.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from graph import GraphError, SQLStore, StoreURL

from .._errors import CopiedDatabase, StateDirError
from ._files import refuse_odd

SUFFIX = ".state"
HISTORY = ".openprogram-database.history"
"""Moves, copied folders and adoptions, one JSON line each (beside the marker)."""
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def checked_id(database: str | None, where: str) -> str | None:
    """``database`` when it has the form of the UUIDs we write (it names a folder and a
    marker line); anything else, such as ``../..`` or an absolute path planted in a shared
    server's ``graph_database`` row, is refused before it touches a path."""
    if database is None or _UUID.fullmatch(database):
        return database
    raise StateDirError(
        f"{where} names itself {database[:80]!r} (graph_database, key id), which is not a "
        "database UUID; refusing to use it as a state folder name: give it a new UUID "
        "(openprogram adopt-state --rekey) if the row was changed by mistake"
    )


def sqlite_file(url: str) -> Path | None:
    """The database file a SQLite URL names (None: not a SQLite file)."""
    return StoreURL.parse(url).file


@dataclass(frozen=True)
class Owner:
    """The database file a folder serves, and the folder as it was when that was written."""

    path: str
    device: int
    inode: int
    folder: str
    folder_device: int
    folder_inode: int

    def same_file(self, other: Owner) -> bool:
        return self.path == other.path or (self.device, self.inode) == (
            other.device,
            other.inode,
        )

    def same_folder(self, other: Owner) -> bool:
        return (self.folder_device, self.folder_inode) == (other.folder_device, other.folder_inode)


def owner_of(file: Path, folder: Path) -> Owner | None:
    """``file`` and ``folder`` as a marker records them (None: one of them is not there)."""
    try:
        found, where = os.stat(file), os.stat(folder)
    except OSError:
        return None
    return Owner(
        os.path.realpath(file), found.st_dev, found.st_ino,
        os.path.realpath(folder), where.st_dev, where.st_ino,
    )  # fmt: skip


_FIELDS = (
    ("path", str), ("device", int), ("inode", int),
    ("folder", str), ("folder_device", int), ("folder_inode", int),
)  # fmt: skip


def encode(database: str, owner: Owner | None) -> str:
    """The marker's text: the UUID on the first line, the owner as JSON on the second (a
    version from before reads the whole text as the UUID, so it refuses such a folder as
    another database's rather than share it)."""
    if owner is None:
        return database + "\n"
    return database + "\n" + json.dumps(asdict(owner), ensure_ascii=False) + "\n"


def decode(text: str) -> tuple[str | None, Owner | None]:
    """The UUID and the owner a marker names (a marker without a readable owner: None)."""
    first, _, rest = text.partition("\n")
    database = first.strip() or None
    try:
        fields = json.loads(rest) if rest.strip() else None
        owner = Owner(**fields) if isinstance(fields, dict) else None
    except (ValueError, TypeError):
        owner = None
    if owner is not None and not all(
        isinstance(getattr(owner, name), kind) for name, kind in _FIELDS
    ):
        owner = None
    return database, owner


def holds(path: str | Path, database: str) -> bool:
    """Whether the file at ``path`` is a database whose UUID is ``database``."""
    try:
        store = SQLStore(path, create=False, read_only=True)
    except GraphError:
        return False
    try:
        return store.database_id() == database
    except GraphError as error:
        if "locked" in str(error):
            raise StateDirError(
                f"cannot tell whether {path} still holds database {database}: it is locked; "
                "try again when the process using it is done"
            ) from error
        return False
    finally:
        store.close()


def judge(folder: Path, database: str, file: Path, recorded: Owner | None) -> str | None:
    """What ``file`` (holding ``database``) is to ``folder``, whose marker names that UUID
    and ``recorded``: None when the marker is current; otherwise the change the first writer
    writes down (``moved``, ``copied``; ``named`` for a marker that did not name its file, or
    a file replaced in place). A copy is refused with :class:`CopiedDatabase`."""
    me = owner_of(file, folder)
    if me is None:
        return None  # no file (an in-memory URL) or no folder yet: nothing to judge
    if recorded is None:
        _check_older(folder, database, file, me)
        return "named"
    if recorded.path == me.path:
        return None if recorded == me else "named"  # the file replaced in place: still it
    if _another_name(recorded.path, file):
        return None
    if not recorded.same_folder(me) and _folder_still_there(recorded):
        return "copied"
    if holds(recorded.path, database):
        raise copied(folder, recorded.path, file, database)
    return "moved"


def _another_name(path: str, file: Path) -> bool:
    """Whether ``path`` is a second name (a hardlink) of ``file``."""
    try:
        return os.path.samefile(path, file)
    except OSError:
        return False


def _folder_still_there(recorded: Owner) -> bool:
    try:
        found = os.stat(recorded.folder)
    except OSError:
        return False
    return (found.st_dev, found.st_ino) == (recorded.folder_device, recorded.folder_inode)


def _check_older(folder: Path, database: str, file: Path, me: Owner) -> None:
    """A marker that names only the UUID: the folder is ``X``'s when it is ``X.state`` and
    ``X`` (another file than this one) still holds the UUID."""
    if Path(me.folder) == Path(os.path.realpath(file.with_name(file.name + SUFFIX))):
        return
    name = Path(me.folder).name
    if not name.endswith(SUFFIX) or name == SUFFIX:
        return
    candidate = Path(me.folder).with_name(name.removesuffix(SUFFIX))
    try:
        if os.path.samefile(candidate, file):
            return
    except OSError:
        return
    if holds(candidate, database):
        raise copied(folder, str(candidate), file, database)


def copied(folder: Path, original: str, file: Path, database: str) -> CopiedDatabase:
    return CopiedDatabase(
        f"{file} is a copy of {original} (the same database UUID), refused its state folder "
        f"{folder}: `adopt-state --rekey` makes the copy a database of its own, `adopt-state` "
        "takes the folder over (recorded)"
    )


def record(folder: Path, event: str, database: str, before: str | None, after: str) -> None:
    """One line of the folder's history: what changed hands, when."""
    line = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "event": event,
        "database": database,
        "from": before,
        "to": after,
    }
    where = folder / HISTORY
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        handle = os.open(where, flags, 0o644)
    except OSError as error:
        raise StateDirError(f"cannot write {where}: {error.strerror}") from error
    try:
        refuse_odd(os.fstat(handle), where)
        os.write(handle, (json.dumps(line, ensure_ascii=False) + "\n").encode())
    finally:
        os.close(handle)
