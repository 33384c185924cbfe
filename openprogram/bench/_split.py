"""A split of the traces into halves fixed in a file: defaults are chosen on one half (TUNE)
and figures reported on the other (REPORT), so a choice cannot fit the traces it is judged on.

The file holds one trace a line, ``<half> <path relative to the traces folder>``; ``#`` starts a
comment. Every trace the bench is given must be listed (a trace outside the split would count on
neither side silently), and every trace listed must be there (a missing one would shrink a half
without anyone noticing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from openprogram._errors import BenchError

HALVES = ("tune", "report")
_NAMED = 5
"""How many missing or unlisted traces an error names before it says how many more."""


@dataclass(frozen=True)
class Split:
    """The halves a split file assigns, by path relative to the traces folder."""

    source: str
    halves: dict[str, str]
    """Trace path (POSIX, relative) → its half."""


def read_split(path: Path) -> Split:
    """The split in ``path``; a line that is not ``<half> <relative path>``, or a trace listed
    twice, is an error naming the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise BenchError(f"--split {path}: cannot read it ({error.strerror})") from None
    halves: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{path}:{number}"
        half, _, rest = line.partition(" ")
        trace = rest.strip()
        if half not in HALVES or not trace:
            raise BenchError(
                f"{where}: expected '<half> <trace path>' with half {' or '.join(HALVES)}, "
                f"got {line!r}"
            )
        relative = PurePosixPath(trace)
        if relative.is_absolute() or ".." in relative.parts or " " in trace:
            raise BenchError(
                f"{where}: {trace!r} must be one path relative to the traces folder "
                "(no spaces, no '..')"
            )
        key = relative.as_posix()
        if key in halves:
            raise BenchError(f"{where}: {key} is already listed on line {first_line[key]}")
        halves[key] = half
        first_line[key] = number
    if not halves:
        raise BenchError(f"--split {path}: lists no traces")
    return Split(str(path), halves)


def half_of(split: Split, half: str, files: Sequence[Path]) -> list[tuple[Path, str]]:
    """The ``files`` that ``split`` puts in ``half``, each with its name in the split.

    Each file is matched to the entry its path ends with, so a subset (one folder, a few files)
    works as well as the whole traces folder. A file the split does not list, or an entry that
    is not under the traces folder the files came from, is an error naming them.
    """
    if half not in HALVES:
        raise BenchError(f"--half {half!r}: expected {' or '.join(HALVES)}")
    chosen: list[tuple[Path, str]] = []
    unlisted: list[str] = []
    roots: set[Path] = set()
    for file in files:
        entry = _entry(split, file)
        if entry is None:
            unlisted.append(str(file))
            continue
        roots.add(_root(file.absolute(), entry))
        if split.halves[entry] == half:
            chosen.append((file, entry))
    if unlisted:
        raise BenchError(
            f"--split {split.source} does not list {len(unlisted)} of the traces given: "
            f"{_names(unlisted)}; add them to a half or leave them out"
        )
    missing = sorted(
        str(root / entry)
        for root in sorted(roots)
        for entry in split.halves
        if not (root / entry).is_file()
    )
    if missing:
        raise BenchError(
            f"--split {split.source} names {len(missing)} trace(s) that are not there: "
            f"{_names(missing)}"
        )
    return chosen


def _entry(split: Split, file: Path) -> str | None:
    """The longest entry of ``split`` that ``file``'s path ends with."""
    parts = file.absolute().parts
    for size in range(len(parts), 0, -1):
        key = PurePosixPath(*parts[-size:]).as_posix()
        if key in split.halves:
            return key
    return None


def _root(file: Path, entry: str) -> Path:
    """The traces folder ``file`` sits in as ``entry``."""
    root = file
    for _ in PurePosixPath(entry).parts:
        root = root.parent
    return root


def _names(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:_NAMED])
    return shown + (f" and {len(paths) - _NAMED} more" if len(paths) > _NAMED else "")
