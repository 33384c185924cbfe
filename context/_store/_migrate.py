"""Moving files out of an old shared state folder into the database's own one.

Before state folders belonged to databases, every database used from a working folder
wrote into one ``./.openprogram``. :func:`migrate_state` copies (never moves) what belongs
to this database into its own folder: an offloaded output when its node id is a node of
this database's session, a records-log line when its record id is one of this database's
records. What belongs to another database stays where it is, untouched. It runs from
``openprogram migrate-state`` and when a ``Session`` opens a session for writing (never on
a read-only open).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

import msgspec

from graph import Store, is_safe_id

from ._files import append_lines, write_text_once
from ._folder import StateFolder
from ._records import decode_record
from ._storage import RECORDS

OLD_FOLDER = Path(".openprogram")
"""Where every database used to keep its files (relative to the working folder)."""


def migrate_state(
    store: Store,
    folder: StateFolder,
    old: Path = OLD_FOLDER,
    sessions: Iterable[str] | None = None,
) -> list[Path]:
    """Copy this database's files (of ``sessions``, or of all its sessions) from ``old``
    into ``folder``; returns the files written. Files already copied are skipped, so it
    can run again; nothing in ``old`` is changed."""
    if not old.is_dir() or old.is_symlink() or _same(old, folder.path):
        return []
    names = list(sessions) if sessions is not None else [s.id for s in store.sessions()]
    copied: list[Path] = []
    for session in names:
        if not is_safe_id(session):
            continue
        copied += _outputs(store, folder, old / "tool_results" / session, session)
        copied += _records(store, folder, old / "records" / f"{session}.jsonl", session)
    return copied


def _same(old: Path, new: Path) -> bool:
    try:
        return old.resolve() == new.resolve()
    except OSError:
        return False


def _outputs(store: Store, folder: StateFolder, source: Path, session: str) -> list[Path]:
    if source.is_symlink() or not source.is_dir():
        return []
    written = []
    for file in sorted(source.iterdir()):
        node = file.stem
        if file.suffix != ".txt" or not is_safe_id(node) or store.session_of(node) != session:
            continue  # not ours (another database's node), or not an output
        data = _read_regular(file)
        if data is None:
            continue
        try:
            text = data.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            continue  # not a file we wrote
        if write_text_once(folder.claim(), ["tool_results", session], file.name, text):
            written.append(folder.path / "tool_results" / session / file.name)
    return written


def _records(store: Store, folder: StateFolder, source: Path, session: str) -> list[Path]:
    data = _read_regular(source)
    if data is None:
        return []
    ours = {entry.key for entry in store.read_log(session, RECORDS)}
    target = folder.path / "records" / source.name
    have = {_record_id(line) for line in (_read_regular(target) or b"").splitlines()}
    lines = []
    for line in data.splitlines():
        found = _record_id(line)
        if found is not None and found in ours and found not in have:
            lines.append(line)
            have.add(found)
    if not lines:
        return []
    append_lines(folder.claim(), ["records"], source.name, lines)
    return [target]


def _record_id(line: bytes) -> str | None:
    try:
        return decode_record(line).id
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _read_regular(path: Path) -> bytes | None:
    """A regular file's bytes, never through a symlink (None: missing, not a regular file,
    or one with a second name: a hardlink planted there is never copied in as ours)."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(handle, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            return None
        return file.read()
