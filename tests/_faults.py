"""Fault injection in the style of SQLite's own tests, for the file and database paths.

Two harnesses: :class:`Faults` and :func:`each_fault` for the state folder's ``os`` calls
(and, given engines, a graph's statements), and :func:`failing` for one store's statements
(below).

A :class:`Faults` counts the calls it watches: the ``os`` calls of the modules that touch
the state folder (each ``os.write``, ``fsync``, ``rename``/``replace``, ``unlink``,
``rmdir``, ``mkdir``, ``open`` …) and, when given engines, each database statement. It
makes the ``fail_at``-th of them fail, and :func:`each_fault` runs a scenario once per
point, from a fresh folder each time, until the operation completes without reaching the
point (SQLite's loop: fail the 1st call, then the 2nd, …). After each failure the
scenario checks its invariants.

Modes (what the chosen point does):

- ``"error"``: the call raises ``OSError(EIO)`` (a statement raises the driver's
  ``OperationalError``); later calls succeed (a transient fault).
- ``"full"``: a disk filling up. An ``os.write`` at the point writes half its bytes and
  returns the short count; every later write (and fsync) raises ``ENOSPC`` until
  :meth:`Faults.clear` (space freed). Other calls at the point raise ``ENOSPC``.

``before`` runs an action just before the chosen point's call instead of failing it:
the race suite swaps a folder for a symlink or a FIFO between a check and its use.

The size is small in ``make test``; ``OPENPROGRAM_FAULTS=large`` runs the larger scenarios
(:func:`large`).

Database statements only (a store's own write paths), e.g. every statement of an append::

    def prepare(folder):
        return ConversationGraph.open(folder / "op.db", session="s1")

    def check(graph, faults):
        # faults.fired names the statement that failed, faults.raised what append raised
        ...  # every acknowledged node present, no half layer …

    each_fault(tmp_path, prepare, lambda g: g.append(message), check,
               kinds=("sql",), modules=(), engines=lambda g: [g.store.engine])
"""

from __future__ import annotations

import errno
import hashlib
import os
import sqlite3
import stat
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

# internal: faults are injected into the state folder's file operations and the SQL row writer
import context._store._files
import context._store._removal
import context._store._sessions
import graph._sql
from graph import MemoryStore, SQLStore, Store, StoreError

FILE_MODULES: tuple[types.ModuleType, ...] = (
    context._store._files,
    context._store._removal,
    context._store._sessions,
)
"""Every module of ours that calls ``os`` on the state folder."""

WRITES = ("write", "fsync", "rename", "replace", "unlink", "rmdir", "mkdir", "ftruncate")
"""The calls that change the disk: the ones a fault loop fails in turn."""

EVERY_CALL = (*WRITES, "open", "stat", "fstat", "listdir", "read", "pread")
"""Every call, reads included: where the race suite swaps things."""

T = TypeVar("T")


def large() -> bool:
    """True when the larger fault runs are asked for (``OPENPROGRAM_FAULTS=large``)."""
    return os.environ.get("OPENPROGRAM_FAULTS", "") == "large"


@dataclass(frozen=True)
class Point:
    """One watched call: ``os.write`` (``kind="write"``) or a statement (``kind="sql"``)."""

    index: int
    kind: str
    detail: str


@dataclass
class Faults:
    """Counts watched calls; fails (or runs ``before`` at) the ``fail_at``-th."""

    kinds: Sequence[str] = WRITES
    fail_at: int | None = None
    mode: str = "error"
    before: Callable[[Point], None] | None = None
    seen: list[Point] = field(default_factory=list)
    fired: Point | None = None
    full: bool = False
    raised: BaseException | None = None

    def clear(self) -> None:
        """Space freed, fault gone: every later call runs for real."""
        self.full = False
        self.fail_at = None
        self.before = None

    def point(self, kind: str, detail: str) -> bool:
        """Count a call; True when it is the one to fail (``before`` already ran)."""
        if kind not in self.kinds:
            return False
        here = Point(len(self.seen), kind, detail)
        self.seen.append(here)
        if here.index != self.fail_at:
            return False
        self.fired = here
        if self.before is not None:
            self.before(here)
            return False
        return True

    def os_error(self, kind: str) -> OSError:
        code = errno.ENOSPC if self.mode == "full" else errno.EIO
        return OSError(code, f"injected {os.strerror(code)} in os.{kind}")


def _detail(args: tuple[Any, ...]) -> str:
    for arg in args:
        if isinstance(arg, str | os.PathLike):
            return os.fspath(arg)  # type: ignore[arg-type]
    return ""


class _FaultyOS:
    """The ``os`` module as seen by a patched module: watched calls go through ``faults``."""

    def __init__(self, real: types.ModuleType, faults: Faults) -> None:
        self._real = real
        self._faults = faults

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._real, name)
        if name not in EVERY_CALL:
            return value
        faults = self._faults

        def call(*args: Any, **kwargs: Any) -> Any:
            if faults.full and name in ("write", "fsync"):
                raise faults.os_error(name)
            if faults.point(name, _detail(args)):
                if name == "write" and faults.mode == "full":
                    faults.full = True
                    data = bytes(args[1])
                    return value(args[0], data[: len(data) // 2]) if len(data) > 1 else 0
                if faults.mode == "full":
                    faults.full = True
                raise faults.os_error(name)
            return value(*args, **kwargs)

        return call


@contextmanager
def injected(
    faults: Faults,
    *,
    modules: Sequence[types.ModuleType] = FILE_MODULES,
    engines: Sequence[Engine] = (),
) -> Iterator[Faults]:
    """Route the ``os`` calls of ``modules`` and the statements of ``engines`` through
    ``faults`` inside the block."""
    saved = [(module, module.os) for module in modules]  # type: ignore[attr-defined]
    for module in modules:
        module.os = _FaultyOS(os, faults)  # type: ignore[attr-defined]

    def statement(conn: Any, cursor: Any, sql: str, *rest: Any) -> None:
        if faults.full and not sql.lstrip().upper().startswith("SELECT"):
            raise sqlite3.OperationalError("database or disk is full (injected)")
        if faults.point("sql", " ".join(sql.split())[:60]):
            if faults.mode == "full":
                faults.full = True
                raise sqlite3.OperationalError("database or disk is full (injected)")
            raise sqlite3.OperationalError("disk I/O error (injected)")

    for engine in engines:
        event.listen(engine, "before_cursor_execute", statement)
    try:
        yield faults
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", statement)
        for module, real in saved:
            module.os = real  # type: ignore[attr-defined]


def count_points(
    act: Callable[[], object],
    *,
    kinds: Sequence[str] = WRITES,
    modules: Sequence[types.ModuleType] = FILE_MODULES,
    engines: Sequence[Engine] = (),
) -> list[Point]:
    """The watched calls ``act`` makes when nothing fails."""
    faults = Faults(kinds=kinds)
    with injected(faults, modules=modules, engines=engines):
        act()
    return faults.seen


def each_fault(
    base: Path,
    prepare: Callable[[Path], T],
    act: Callable[[T], object],
    check: Callable[[T, Faults], None],
    *,
    kinds: Sequence[str] = WRITES,
    mode: str = "error",
    engines: Callable[[T], Sequence[Engine]] = lambda _: (),
    modules: Sequence[types.ModuleType] = FILE_MODULES,
    before: Callable[[T, Point], None] | None = None,
    limit: int = 10_000,
) -> list[Point]:
    """Run ``act`` once per watched call, failing that call (or running ``before`` just
    before it), each run in a fresh folder under ``base`` made by ``prepare``; ``check``
    sees the scenario and the faults (``fired``, ``raised``) after each. Stops when a run
    completes without reaching its point; returns the points that fired.

    ``act`` may raise: the error is kept in ``faults.raised`` for ``check`` to judge.
    """
    fired: list[Point] = []
    for index in range(limit):
        folder = base / f"point-{index}"
        folder.mkdir(parents=True)
        scenario = prepare(folder)
        faults = Faults(kinds=kinds, fail_at=index, mode=mode)
        if before is not None:
            faults.before = partial(before, scenario)
        with injected(faults, modules=modules, engines=engines(scenario)):
            try:
                act(scenario)
            except Exception as error:  # judged by check
                faults.raised = error
        if faults.fired is None:
            assert faults.raised is None, f"failed with no fault injected: {faults.raised!r}"
            return fired
        fired.append(faults.fired)
        faults.clear()
        check(scenario, faults)
    raise AssertionError(f"still reaching new points after {limit} runs")


# -- invariants ---------------------------------------------------------------------------


def snapshot(root: Path, *, skip: Callable[[Path], bool] = lambda _: False) -> dict[str, str]:
    """Everything under ``root`` (not following links): kind, and content hash or target;
    ``skip`` leaves out a path and what is under it. Two equal snapshots mean nothing there
    was touched."""
    found: dict[str, str] = {}
    if not root.exists() and not root.is_symlink():
        return found
    for folder, folders, files in os.walk(root, followlinks=False):
        folders[:] = [name for name in folders if not skip(Path(folder, name))]
        for name in [*folders, *files]:
            path = Path(folder, name)
            if skip(path):
                continue
            info = path.lstat()
            key = str(path.relative_to(root))
            if stat.S_ISLNK(info.st_mode):
                found[key] = f"link -> {os.readlink(path)}"
            elif stat.S_ISREG(info.st_mode):
                found[key] = "file " + hashlib.sha256(path.read_bytes()).hexdigest()
            elif stat.S_ISDIR(info.st_mode):
                found[key] = "folder"
            else:
                found[key] = f"special {stat.S_IFMT(info.st_mode)}"
    return found


def leftovers(state_dir: Path) -> list[Path]:
    """Temporary files a write left behind in the state folder."""
    if not state_dir.exists():
        return []
    return sorted(p for p in state_dir.rglob("*.tmp") if not p.is_symlink())


# Statement faults for one store (:func:`failing`): make the Nth statement a store sends
# fail, for N = 1, 2, … until a block runs through, and check after each
# failure that the store holds exactly what it held before the block.
#
# A "statement" is what reaches the database: every cursor execution of a SQL store
# (``BEGIN`` included) and every bulk COPY on PostgreSQL; for the memory store, every call
# of a writing method. The failure is what a refusing database raises (SQLAlchemy's
# ``OperationalError``), so it travels the same path as a real one.

MEMORY_WRITES = (
    "ensure_session",
    "commit",
    "update_session_meta",
    "put_values",
    "append_log",
    "put_lease",
    "renew_lease",
    "drop_lease",
    "delete_session",
)


class InjectedFault(StoreError):
    """The memory store's injected failure (a SQL store raises the driver's kind)."""


@dataclass
class StatementFaults:
    """Counts statements; the one numbered ``fail_at`` (1-based) fails."""

    fail_at: int | None = None
    seen: int = 0
    failed: bool = False

    def tick(self, what: str) -> None:
        self.seen += 1
        if self.fail_at is not None and self.seen == self.fail_at:
            self.failed = True
            raise OperationalError(
                what, None, Exception(f"injected fault at statement {self.seen}")
            )


@contextmanager
def failing(store: Store, fail_at: int | None = None) -> Iterator[StatementFaults]:
    """Within the block, the ``fail_at``-th statement of ``store`` fails (``None``: only
    count them)."""
    faults = StatementFaults(fail_at)
    if isinstance(store, SQLStore):
        with _sql_faults(store, faults):
            yield faults
        return
    assert isinstance(store, MemoryStore)
    with _memory_faults(store, faults):
        yield faults


@contextmanager
def _sql_faults(store: SQLStore, faults: StatementFaults) -> Iterator[None]:
    def before(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        faults.tick(statement)

    original = graph._sql.insert_rows

    def insert_rows(connection: Any, insert: str, rows: Any) -> None:
        faults.tick(f"COPY for {insert}")
        original(connection, insert, rows)

    event.listen(store.engine, "before_cursor_execute", before)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(graph._sql, "insert_rows", insert_rows)
        try:
            yield
        finally:
            event.remove(store.engine, "before_cursor_execute", before)


@contextmanager
def _memory_faults(store: MemoryStore, faults: StatementFaults) -> Iterator[None]:
    def wrapped(name: str) -> Any:
        method = getattr(type(store), name)

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                faults.tick(name)
            except OperationalError as error:
                raise InjectedFault(str(error.orig)) from None
            return method(store, *args, **kwargs)

        return call

    with pytest.MonkeyPatch.context() as patch:
        for name in MEMORY_WRITES:
            patch.setattr(store, name, wrapped(name))
        yield
