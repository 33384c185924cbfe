"""Scrubbing a session everywhere: the store (see ``graph.scrub``) and the state folder.

One implementation for every caller (``Session.scrub``, ``openprogram scrub``): the state
folder is the database's own (or the one named), resolved and checked as every other
command does, so no caller can scrub the rows and miss the files.

A session's files under the state folder — its offloaded outputs
(``tool_results/<session>/``) and its records log (``records/<session>.jsonl``) — are
rewritten like its rows: walked from the state folder by directory descriptors, never
through a symlink (one found is skipped). A changed file is written beside the old one and
renamed over its name, never rewritten in place; the old inode, once no name is left on
it, is overwritten with zeros so the secret does not stay in its blocks. A file with a
second name (a hardlink, perhaps the user's ``.env``) or that is not a regular file (a
FIFO) is refused: the rest is scrubbed, then :class:`ScrubRefused` names what was left.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator, Mapping
from contextlib import suppress
from pathlib import Path

import msgspec

from graph import Redactor, Scrubber, ScrubReport, Store, is_safe_id, scrub, scrubber

from .._errors import ContextError, StateDirError
from ._files import DIR_FLAGS, FILE_FLAGS
from ._folder import state_folder

_ZEROS = b"\0" * (1 << 16)


class ScrubRefused(StateDirError):
    """Files a scrub left as they were (a hardlink, a FIFO); everything else is scrubbed,
    and ``report`` says what was."""

    def __init__(self, report: ScrubReport, folder: Path, refused: list[str]) -> None:
        super().__init__(
            f"scrubbed {report.replaced} match(es), but left {len(refused)} file(s) as they "
            f"were: {', '.join(refused)}; a file with a second name (a hardlink) or not a "
            f"regular file is never rewritten: remove it from {folder} and scrub again"
        )
        self.report = report
        self.refused = tuple(refused)


def scrub_session(
    store: Store,
    session: str,
    patterns: Mapping[str, str] | Redactor,
    state_dir: str | os.PathLike[str] | None = None,
    *,
    vacuum: bool = True,
) -> ScrubReport:
    """Rewrite what ``patterns`` (``{label: regex}``) match in everything kept for
    ``session``: its rows in ``store`` and its files in the database's state folder
    (``state_dir``: the one named instead, which must not serve another database); the
    report (and the session's audit log) names labels, counts and files, never what
    matched. A file it must not rewrite raises :class:`ScrubRefused` after the rest."""
    if not is_safe_id(session):
        raise ContextError(f"session id {session!r} is not a safe id")
    folder = state_folder(store, state_dir).path
    scrubbing = Scrubber(scrubber(patterns))
    files: list[str] = []
    refused: list[str] = []
    try:
        root = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        root = None
    if root is not None:
        try:
            files += _scrub_folder(root, ("tool_results", session), scrubbing, refused)
            files += _scrub_file_at(root, ("records",), f"{session}.jsonl", scrubbing, refused)
        finally:
            os.close(root)
    report = scrub(
        store,
        session,
        scrubbing.redactor,
        vacuum=vacuum,
        files=tuple(files),
        replaced=scrubbing.replaced,
    )
    if refused:
        raise ScrubRefused(report, folder, refused)
    return report


def _open_folder(root: int, parts: tuple[str, ...]) -> int | None:
    """A descriptor of ``root/parts…``; None when missing or when a part is a link."""
    fd = os.dup(root)
    for part in parts:
        try:
            inner = os.open(part, DIR_FLAGS, dir_fd=fd)
        except OSError:
            os.close(fd)
            return None
        os.close(fd)
        fd = inner
    return fd


Refused = list[str]
"""What a scrub left as it was, one line each naming the file (under the state folder)."""


def _scrub_folder(
    root: int, parts: tuple[str, ...], scrubbing: Scrubber, refused: Refused
) -> list[str]:
    fd = _open_folder(root, parts)
    if fd is None:
        return []
    try:
        return list(_walk(fd, "/".join(parts), scrubbing, refused))
    finally:
        os.close(fd)


def _walk(folder: int, where: str, scrubbing: Scrubber, refused: Refused) -> Iterator[str]:
    for entry in sorted(os.listdir(folder)):
        try:
            found = os.stat(entry, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(found.st_mode):
            try:
                inner = os.open(entry, DIR_FLAGS, dir_fd=folder)
            except OSError:
                continue  # swapped for a link since the look: never followed
            try:
                yield from _walk(inner, f"{where}/{entry}", scrubbing, refused)
            finally:
                os.close(inner)
        elif not stat.S_ISLNK(found.st_mode) and _rewrite(
            folder, entry, f"{where}/{entry}", scrubbing, refused
        ):
            yield f"{where}/{entry}"


def _scrub_file_at(
    root: int, parts: tuple[str, ...], name: str, scrubbing: Scrubber, refused: Refused
) -> list[str]:
    fd = _open_folder(root, parts)
    if fd is None:
        return []
    where = "/".join((*parts, name))
    try:
        found = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if not stat.S_ISLNK(found.st_mode) and _rewrite(fd, name, where, scrubbing, refused):
            return [where]
        return []
    except FileNotFoundError:
        return []
    finally:
        os.close(fd)


def _cleaned(data: bytes, name: str, scrubbing: Scrubber) -> bytes:
    text = data.decode("utf-8", "surrogateescape")
    if not name.endswith(".jsonl"):
        return scrubbing.text(text).encode("utf-8", "surrogateescape")
    lines = []
    for line in text.split("\n"):
        try:
            msgspec.json.decode(line) if line.strip() else None
        except msgspec.DecodeError:
            lines.append(scrubbing.text(line))
        else:
            lines.append(scrubbing.stored(line) if line.strip() else line)
    return "\n".join(lines).encode("utf-8", "surrogateescape")


def _rewrite(folder: int, name: str, where: str, scrubbing: Scrubber, refused: Refused) -> bool:
    """Scrub one file by writing a new one and renaming it over ``name``; True when it
    changed. Anything but a regular file of one link is refused (said in ``refused``), and
    is opened without blocking, so a FIFO is refused rather than waited on."""
    try:
        old = os.open(name, os.O_RDWR | FILE_FLAGS, dir_fd=folder)
    except FileNotFoundError:
        return False
    except OSError as error:
        if error.errno != errno.ELOOP:  # a symlink swapped in: skipped, as one found is
            refused.append(f"{where} (cannot open it: {error.strerror})")
        return False
    info = os.fstat(old)
    why = (
        "not a regular file"
        if not stat.S_ISREG(info.st_mode)
        else (f"has {info.st_nlink} links" if info.st_nlink > 1 else "")
    )
    if why:
        os.close(old)
        refused.append(f"{where} {why}")
        return False
    try:
        data = _read_all(old)
        cleaned = _cleaned(data, name, scrubbing)
        if cleaned == data:
            return False
        temporary = f".{name}.{secrets.token_hex(6)}.scrub"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        handle = os.open(temporary, flags, 0o644, dir_fd=folder)
        try:
            _write_all(handle, cleaned)
            os.fsync(handle)
            os.close(handle)
            os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with suppress(OSError):
                os.close(handle)
            with suppress(FileNotFoundError):
                os.unlink(temporary, dir_fd=folder)
            raise
        if os.fstat(old).st_nlink == 0:
            _zero(old, len(data))
        else:  # linked elsewhere since it was opened: that name keeps the old bytes
            refused.append(f"{where} (its old bytes got another name while scrubbed)")
        return True
    finally:
        os.close(old)


def _read_all(handle: int) -> bytes:
    chunks = []
    while chunk := os.read(handle, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _zero(handle: int, size: int) -> None:
    """Overwrite a replaced file's bytes: no name is left on the inode (only this
    descriptor holds it), but its blocks held the secret."""
    os.lseek(handle, 0, os.SEEK_SET)
    left = size
    while left > 0:
        left -= os.write(handle, _ZEROS[: min(left, len(_ZEROS))])
    os.fsync(handle)


def _write_all(handle: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(handle, view)
        view = view[written:]
