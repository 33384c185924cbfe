"""Scrubbing a session everywhere: the store (see ``graph.scrub``) and the state folder.

A session's files under the state folder — its offloaded outputs
(``tool_results/<session>/``) and its records log (``records/<session>.jsonl``) — are
rewritten like its rows: walked from the state folder by directory descriptors, never
through a symlink (one found is skipped and named in the report). A changed file is
written beside the old one and renamed over it, then the old file's bytes are
overwritten with zeros before it is closed, so the secret does not stay in its blocks.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterator, Mapping
from contextlib import suppress
from pathlib import Path

import msgspec

from graph import Redactor, Scrubber, ScrubReport, Store, is_safe_id, scrub, scrubber

from ._errors import ContextError

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_ZEROS = b"\0" * (1 << 16)


def scrub_session(
    store: Store,
    session: str,
    patterns: Mapping[str, str] | Redactor,
    state_dir: Path | None = None,
    *,
    vacuum: bool = True,
) -> ScrubReport:
    """Rewrite what ``patterns`` (``{label: regex}``) match in everything kept for
    ``session``: its rows in ``store`` and its files under ``state_dir``; the report (and
    the session's audit log) names labels, counts and files, never what matched."""
    if not is_safe_id(session):
        raise ContextError(f"session id {session!r} is not a safe id")
    scrubbing = Scrubber(scrubber(patterns))
    files: list[str] = []
    if state_dir is not None and Path(state_dir).is_dir():
        root = os.open(state_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            files += _scrub_folder(root, ("tool_results", session), scrubbing)
            files += _scrub_file_at(root, ("records",), f"{session}.jsonl", scrubbing)
        finally:
            os.close(root)
    return scrub(
        store,
        session,
        scrubbing.redactor,
        vacuum=vacuum,
        files=tuple(files),
        replaced=scrubbing.replaced,
    )


def _open_folder(root: int, parts: tuple[str, ...]) -> int | None:
    """A descriptor of ``root/parts…``; None when missing or when a part is a link."""
    fd = os.dup(root)
    for part in parts:
        try:
            inner = os.open(part, _DIR, dir_fd=fd)
        except OSError:
            os.close(fd)
            return None
        os.close(fd)
        fd = inner
    return fd


def _scrub_folder(root: int, parts: tuple[str, ...], scrubbing: Scrubber) -> list[str]:
    fd = _open_folder(root, parts)
    if fd is None:
        return []
    try:
        return list(_walk(fd, "/".join(parts), scrubbing))
    finally:
        os.close(fd)


def _walk(folder: int, where: str, scrubbing: Scrubber) -> Iterator[str]:
    for entry in sorted(os.listdir(folder)):
        found = os.stat(entry, dir_fd=folder, follow_symlinks=False)
        if stat.S_ISDIR(found.st_mode):
            inner = os.open(entry, _DIR, dir_fd=folder)
            try:
                yield from _walk(inner, f"{where}/{entry}", scrubbing)
            finally:
                os.close(inner)
        elif stat.S_ISREG(found.st_mode) and _rewrite(folder, entry, scrubbing):
            yield f"{where}/{entry}"


def _scrub_file_at(root: int, parts: tuple[str, ...], name: str, scrubbing: Scrubber) -> list[str]:
    fd = _open_folder(root, parts)
    if fd is None:
        return []
    try:
        found = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISREG(found.st_mode) and _rewrite(fd, name, scrubbing):
            return ["/".join((*parts, name))]
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


def _rewrite(folder: int, name: str, scrubbing: Scrubber) -> bool:
    """Scrub one regular file; True when it changed."""
    old = os.open(name, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    try:
        if not stat.S_ISREG(os.fstat(old).st_mode):
            return False
        with os.fdopen(os.dup(old), "rb") as source:
            data = source.read()
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
        _zero(old, len(data))
        return True
    finally:
        os.close(old)


def _zero(handle: int, size: int) -> None:
    """Overwrite a replaced file's bytes (it is unlinked, but its blocks held the secret)."""
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
