"""Writing under the state folder without ever following a link out of it.

Offloaded outputs and record logs live under ``<state_dir>/tool_results/<session>/`` and
``<state_dir>/records/``. Another user (or a bad checkout) may have planted symlinks there;
a write that followed one could overwrite any file we can write, e.g. ``authorized_keys``.
So every write walks from the state folder with directory descriptors, refusing a symlink
at every step (``O_NOFOLLOW``), creates its temporary file exclusively (``O_EXCL``) and
renames it into place within the verified folder: no path is resolved twice.

A file is never written through its inode: a rewrite is a new file renamed over the old
name, and a file in the state folder with a second name (a hardlink planted to make it the
user's ``.env``) is refused, as is anything that is not a regular file. Every open is
non-blocking (``O_NONBLOCK``) and checked with ``fstat``, so a FIFO planted there is
refused at once instead of hanging whoever opens it.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from graph import is_safe_id

from .._budget._tokens import utf8_length
from .._errors import PartialAppend, StateDirError

_CHUNK = 1 << 20

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
"""Open a folder, never through a link, never blocking (a FIFO swapped in is refused)."""
FILE_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
"""Open a file in the state folder: never through a link, never blocking on a FIFO."""


def refuse_odd(info: os.stat_result, where: Path | str) -> None:
    """Refuse what a state-folder file must not be: anything but a regular file (a FIFO,
    a device, a folder), or a regular file with another name somewhere (a hardlink: writing
    to it, or reading it into a prompt, would reach that other file)."""
    if not stat.S_ISREG(info.st_mode):
        raise StateDirError(f"{where} is not a regular file (a FIFO or device?); refusing it")
    if info.st_nlink > 1:
        raise StateDirError(
            f"{where} has {info.st_nlink} links (a second name of a file elsewhere?); "
            "refusing it: remove that file from the state folder"
        )


def open_regular(folder: int | None, name: str | Path, flags: int, where: Path | str) -> int:
    """A descriptor of the state-folder file ``name`` (relative to ``folder``, a folder
    descriptor, or a path when None), opened without following a link or blocking, and
    checked by ``fstat`` to be a regular file with one link (:func:`refuse_odd`)."""
    try:
        handle = os.open(name, flags | FILE_FLAGS, 0o644, dir_fd=folder)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise StateDirError(f"{where} is a symlink; refusing to follow it") from error
        raise
    try:
        refuse_odd(os.fstat(handle), where)
    except BaseException:
        os.close(handle)
        raise
    return handle


@contextmanager
def verified_folder(state_dir: Path, parts: Sequence[str]) -> Iterator[int]:
    """A descriptor of ``state_dir/parts…`` (created as needed), no part a symlink.

    ``state_dir`` itself is the user's choice and may be a link; nothing inside it may be.
    """
    for part in parts:
        if not is_safe_id(part):
            raise StateDirError(f"{part!r} cannot name a folder under {state_dir}")
    try:
        Path(state_dir).mkdir(parents=True, exist_ok=True)
        fd = os.open(state_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as error:
        raise StateDirError(f"cannot open the state folder {state_dir}: {error}") from error
    where = Path(state_dir)
    try:
        for part in parts:
            where = where / part
            with suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            try:
                inner = os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError as error:
                raise StateDirError(
                    f"{where} is a symlink or not a folder; refusing to write through it"
                ) from error
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def _existing(folder: int, name: str, where: Path) -> os.stat_result | None:
    """The regular file ``name`` in ``folder`` (a symlink or anything else counts as
    absent: it is replaced); a regular file with a second name is refused."""
    try:
        found = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(found.st_mode):
        return None
    refuse_odd(found, where)
    return found


def _write_all(handle: int, data: bytes) -> None:
    """Write all of ``data``: a short write (a disk filling up) is continued, and one that
    writes nothing raises, instead of counting the rest as written."""
    view = memoryview(data)
    while view:
        done = os.write(handle, view)
        if done <= 0:
            raise OSError(errno.ENOSPC, "a write made no progress (disk full?)")
        view = view[done:]


def _replace(folder: int, name: str, chunks: Iterable[bytes]) -> None:
    """Write ``chunks`` to a fresh temporary file (created exclusively, never through a
    link) and rename it over ``name``; the temporary file goes if anything fails."""
    temporary = f".{name}.{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    handle = os.open(temporary, flags, 0o644, dir_fd=folder)
    try:
        try:
            for chunk in chunks:
                _write_all(handle, chunk)
        finally:
            os.close(handle)
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary, dir_fd=folder)
        raise


def write_text_once(state_dir: Path, parts: Sequence[str], name: str, text: str) -> bool:
    """Write ``text`` (UTF-8) to ``state_dir/parts…/name`` unless a regular file of its
    size is there already: for files named by what they hold (an offloaded output, by node
    id), so a fresh engine neither encodes nor re-reads a 100 MB output to find that it
    was written. Encoded a megabyte at a time, never whole; True when written now."""
    if not is_safe_id(name):
        raise StateDirError(f"{name!r} cannot name a file under {state_dir}")
    with verified_folder(state_dir, parts) as folder:
        existing = _existing(folder, name, Path(state_dir, *parts, name))
        if existing is not None and existing.st_size == utf8_length(text):
            return False
        chunks = (
            text[start : start + _CHUNK].encode("utf-8", "surrogatepass")
            for start in range(0, len(text), _CHUNK)
        )
        _replace(folder, name, chunks)
        return True


def _read_all(handle: int) -> bytes:
    chunks = []
    while chunk := os.read(handle, _CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def read_regular(path: Path) -> bytes:
    """The bytes of ``path``, which must be a regular file of one link (a symlink to one
    is followed: the path is the reader's choice). Opened without blocking, so a FIFO
    planted there is refused at once instead of hanging the reader."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as error:
        raise StateDirError(f"cannot read {path}: {error.strerror}") from error
    try:
        refuse_odd(os.fstat(handle), path)
        return _read_all(handle)
    finally:
        os.close(handle)


def append_lines(state_dir: Path, parts: Sequence[str], name: str, lines: Sequence[bytes]) -> None:
    """Append whole lines to ``state_dir/parts…/name`` (a regular file, never a link).

    A torn last line (a crash mid-write) is closed first, so a new line always starts on
    its own and is never glued onto the broken one. Each line goes in one ``write`` where
    the disk allows (so concurrent appenders never interleave within a line); a short write
    is continued, and a failure raises :class:`PartialAppend` saying how many lines made it
    whole, after cutting off the part of the line it tore where nobody appended since.
    """
    if not is_safe_id(name):
        raise StateDirError(f"{name!r} cannot name a file under {state_dir}")
    where = Path(state_dir, *parts, name)
    with verified_folder(state_dir, parts) as folder:
        try:
            handle = open_regular(folder, name, os.O_RDWR | os.O_APPEND | os.O_CREAT, where)
        except OSError as error:
            raise StateDirError(f"cannot append to {where}: {error}") from error
        try:
            info = os.fstat(handle)
            prefix = b""
            if info.st_size and os.pread(handle, 1, info.st_size - 1) != b"\n":
                prefix = b"\n"
            _append(handle, where, prefix, [line.rstrip(b"\n") + b"\n" for line in lines])
        finally:
            os.close(handle)


def _append(handle: int, where: Path, prefix: bytes, lines: list[bytes]) -> None:
    for count, line in enumerate(lines):
        data = prefix + line
        start = os.fstat(handle).st_size
        sent = 0
        try:
            while sent < len(data):
                done = os.write(handle, data[sent:])
                if done <= 0:
                    raise OSError(errno.ENOSPC, "a write made no progress (disk full?)")
                sent += done
        except OSError as error:
            if sent:
                _cut_torn(handle, start, sent)
            message = f"cannot append to {where}: {error}; {count} of {len(lines)} line(s) written"
            raise PartialAppend(message, count) from error
        prefix = b""


def _cut_torn(handle: int, start: int, sent: int) -> None:
    """Remove the ``sent`` bytes of a line we tore, unless someone appended after them
    (then the next append closes the torn line and readers skip it, saying so)."""
    with suppress(OSError):
        if os.fstat(handle).st_size == start + sent:
            os.ftruncate(handle, start)
