"""Removing from the state folder without ever following a link out of it.

``delete`` and ``gc`` remove what lies under ``<state_dir>/tool_results`` and
``<state_dir>/records``. Another user may have planted a symlink at any step, or swap a
folder for one between our look and our removal. So removal walks as writes do: from a
descriptor of the state folder, opening each folder with ``O_NOFOLLOW | O_DIRECTORY``
relative to its parent's descriptor and unlinking names relative to it (``unlinkat``). A
link is only ever unlinked itself, never followed; a name that keeps changing, a mount
point or a folder we cannot open is left in place and said, one line naming it.

A dry run walks the same way and lists, in the same order, what a real run removes.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ._files import DIR_FLAGS

MAX_DEPTH = 64
"""A planted tree nested deeper than this is left in place (and said), not recursed into."""

_ATTEMPTS = 4
_NOT_A_FOLDER = (errno.ENOTDIR, errno.ELOOP, errno.EMLINK)


@dataclass
class Removal:
    """What a removal under the state folder did (or, in a dry run, would do)."""

    removed: list[Path] = field(default_factory=list)
    """Every file, link and folder removed, deepest first."""
    refused: list[str] = field(default_factory=list)
    """What was left in place, one line each naming the path and why."""

    def extend(self, other: Removal) -> None:
        self.removed.extend(other.removed)
        self.refused.extend(other.refused)


def _describe(parent: int, name: str) -> str:
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except OSError:
        return "not a folder"
    return "a symlink" if stat.S_ISLNK(mode) else "not a folder"


@contextmanager
def opened_folder(
    state_dir: Path, parts: Sequence[str], report: Removal
) -> Iterator[tuple[int, int] | None]:
    """``(descriptor, device)`` of ``state_dir/parts…`` when it exists and no part is a
    link or a non-folder (that is said in ``report``); None otherwise. Creates nothing.

    ``state_dir`` itself is the user's choice and may be a link; nothing inside it may be.
    """
    try:
        fd = os.open(state_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        yield None
        return
    except OSError as error:
        report.refused.append(f"{state_dir}: cannot open the state folder ({error.strerror})")
        yield None
        return
    where = Path(state_dir)
    try:
        for part in parts:
            where = where / part
            try:
                inner = os.open(part, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                yield None
                return
            except OSError as error:
                what = _describe(fd, part) if error.errno in _NOT_A_FOLDER else error.strerror
                report.refused.append(f"{where} is {what}; not followed, nothing under it removed")
                yield None
                return
            os.close(fd)
            fd = inner
        yield fd, os.fstat(fd).st_dev
    finally:
        os.close(fd)


def remove_entry(
    parent: int, name: str, where: Path, report: Removal, *, device: int, dry_run: bool = False
) -> None:
    """Remove the entry ``name`` of the folder ``parent`` (``where`` names it in reports):
    a folder depth first through its own descriptor, anything else (a file, a link, a FIFO)
    by unlinking its name. Never follows a link; an entry swapped between the look and the
    removal is looked at again."""
    _remove(parent, name, where, report, device, dry_run, 0)


def _remove(
    parent: int, name: str, where: Path, report: Removal, device: int, dry: bool, depth: int
) -> None:
    for _ in range(_ATTEMPTS):
        try:
            folder = os.open(name, DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            return
        except OSError as error:
            if error.errno not in _NOT_A_FOLDER:
                report.refused.append(f"{where}: cannot open ({error.strerror}); left in place")
                return
            if _unlink(parent, name, where, report, dry):
                return
            continue  # became a folder between the open and the unlink
        refusals = len(report.refused)
        try:
            if os.fstat(folder).st_dev != device:
                report.refused.append(f"{where} is a mount point; not descended into")
                return
            if depth >= MAX_DEPTH:
                report.refused.append(f"{where} is nested over {MAX_DEPTH} deep; left in place")
                return
            for child in sorted(os.listdir(folder)):
                _remove(folder, child, where / child, report, device, dry, depth + 1)
        finally:
            os.close(folder)
        if dry:
            if len(report.refused) == refusals:  # a real run leaves a folder it could not empty
                report.removed.append(where)
            return
        try:
            os.rmdir(name, dir_fd=parent)
        except FileNotFoundError:
            return
        except OSError as error:
            if error.errno in (errno.ENOTEMPTY, errno.EEXIST) and len(report.refused) > refusals:
                return  # not empty because of what was refused inside, said already
            if error.errno in (errno.ENOTEMPTY, errno.EEXIST, *_NOT_A_FOLDER):
                continue  # something was added, or the name swapped: look again
            report.refused.append(f"{where}: cannot remove ({error.strerror}); left in place")
            return
        report.removed.append(where)
        return
    report.refused.append(f"{where} kept changing while being removed; left in place")


def _unlink(parent: int, name: str, where: Path, report: Removal, dry: bool) -> bool:
    """Unlink a name that is not a folder; False when it turned out to be one."""
    try:
        if dry:
            if _is_folder(parent, name):
                return False
            os.stat(name, dir_fd=parent, follow_symlinks=False)
        else:
            os.unlink(name, dir_fd=parent)
    except FileNotFoundError:
        return True
    except OSError as error:
        if error.errno in (errno.EISDIR, errno.EPERM) and _is_folder(parent, name):
            return False
        report.refused.append(f"{where}: cannot remove ({error.strerror}); left in place")
        return True
    report.removed.append(where)
    return True


def _is_folder(parent: int, name: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


def remove_under(
    state_dir: Path, parts: Sequence[str], name: str, *, dry_run: bool = False
) -> Removal:
    """Remove ``state_dir/parts…/name`` and what it holds; a link anywhere on the way is
    refused (said in the result), a link at ``name`` is unlinked, never followed."""
    report = Removal()
    with opened_folder(state_dir, parts, report) as opened:
        if opened is not None:
            folder, device = opened
            where = Path(state_dir, *parts, name)
            remove_entry(folder, name, where, report, device=device, dry_run=dry_run)
    return report
