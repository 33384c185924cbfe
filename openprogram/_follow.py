"""Follow a growing transcript: import what a running agent (Claude Code, Codex) appends.

Each poll parses the file again when it changed (its inode, size or mtime) and imports only
the records the session does not hold yet — the importers identify records by a hash chained
over the trace, so a poll is idempotent, a rewritten or rotated file with the same beginning
adds only its new records, and a file that now holds another conversation goes to a new
session. A half-written last line fails the parse; the next change is tried again.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from graph import ConversationGraph, Store, new_id
from openprogram._errors import SessionError, TraceFormatError
from openprogram.importers import ImportStats, find_import, import_parsed, parse_trace

__all__ = ["TraceFollower"]


class TraceFollower:
    """Keeps a session of ``store`` up to date with the transcript at ``path``."""

    def __init__(
        self,
        store: Store,
        path: str | os.PathLike[str],
        *,
        session: str | None = None,
        format: str | None = None,
        interval: float = 1.0,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.path = Path(path)
        self.session = session
        self.format = format
        self.interval = interval
        self.on_error = on_error
        self.error: str | None = None
        """What the last poll could not import (None once one succeeds)."""
        self.polls = 0
        self._seen: tuple[int, int, int] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def poll(self) -> ImportStats | None:
        """Import what is new since the last poll (None: the file did not change)."""
        with self._lock:
            self.polls += 1
            try:
                stat = self.path.stat()
            except FileNotFoundError:
                return None  # between a rotation's rename and its new file
            seen = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
            if seen == self._seen:
                return None
            try:
                stats = self._import()
            except (TraceFormatError, SessionError, OSError) as error:
                self._fail(str(error))
                return None
            self._seen = seen
            self.error = None
            return stats

    def _import(self) -> ImportStats:
        parsed = parse_trace(self.path, format=self.format)
        found = find_import(self.store, parsed)
        if self.session is None:
            self.session = found[0] if found is not None else new_id()
        graph = ConversationGraph(self.store, self.session)
        try:
            return import_parsed(parsed, graph)
        except SessionError:
            if found is not None and found[0] != self.session:
                self.session = found[0]  # the file went back to a conversation held elsewhere
            else:  # the file now holds another conversation: it gets its own session
                self.session = new_id()
            return import_parsed(parsed, ConversationGraph(self.store, self.session))

    def _fail(self, message: str) -> None:
        if message != self.error and self.on_error is not None:
            self.on_error(message)
        self.error = message

    def start(self) -> TraceFollower:
        """Poll every ``interval`` seconds on a daemon thread (after one poll here)."""
        self.poll()
        self._thread = threading.Thread(target=self._run, name="openprogram-follow", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except Exception as error:  # a database hiccup: report it and keep following
                self._fail(f"{type(error).__name__}: {error}")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
