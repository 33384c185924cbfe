"""Follow a growing transcript: import what a running agent (Claude Code, Codex) appends.

A poll does nothing unless the file changed (its inode, size or mtime). A JSONL trace is
then parsed only where it grew (``GrowingTrace``: the byte offset of the last complete line
and the parser's state are kept), and only the records the session does not hold yet are
imported. A half-written last line waits for its end. When the file was replaced, truncated
or rewritten, the follower says so (``on_notice``) and reads it from the start again: the
records it already imported are never appended twice and never dropped; a file that now
holds another conversation goes to a session of its own (the importers identify records by
a hash chained over the trace). A trace that is one JSON document (a mini-swe-agent
``.traj.json``) is parsed whole on each change, as ``openprogram import`` would.

A record the parser still holds (Claude Code writes one response as several records, a block
at a time) is imported only once the file has been quiet for ``settle`` seconds: a stored
node never changes, so a response imported half-written could not take its later blocks.
The records before it are imported at once.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from graph import ConversationGraph, Store, new_id
from openprogram._errors import SessionError, TraceFormatError
from openprogram.importers import (
    ImportStats,
    ParsedTrace,
    detect_format,
    find_import,
    import_parsed,
    parse_trace,
)
from openprogram.importers._detect import line_parser
from openprogram.importers._driver import already_imported
from openprogram.importers._growing import GrowingTrace, Rewritten

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
        on_notice: Callable[[str], None] | None = None,
        settle: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if settle < 0:
            raise ValueError(f"settle must be 0 or more seconds, got {settle}")
        self.store = store
        self.path = Path(path)
        self.session = session
        self.format = format
        self.interval = interval
        self.on_error = on_error
        self.on_notice = on_notice
        self.settle = settle
        """Seconds the file stays unchanged before the records its parser holds are imported."""
        self.clock = clock
        self.error: str | None = None
        """What the last poll could not import (None once one succeeds)."""
        self.notice: str | None = None
        """The last time the file had to be read from the start again, and why."""
        self.polls = 0
        self._seen: tuple[int, int, int] | None = None
        self._growing: GrowingTrace | None = None
        self._held: list[str] | None = None
        """The record chain of what this follower put in ``session`` (see ``ParsedTrace``)."""
        self._open: ConversationGraph | None = None
        self._entry: tuple[str, str] | None = None
        """(session, key) of this follower's last import: the next one into that session
        extends it and replaces it in the session's record of imports."""
        self._unsettled: ParsedTrace | None = None
        """The last read, when records its parser holds are not imported yet."""
        self._changed_at = 0.0
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
                settled = self._unsettled
                if settled is None or self.clock() - self._changed_at < self.settle:
                    return None
                self._unsettled = None
                return self._guarded(lambda: self._import_grown(settled))
            self._changed_at = self.clock()
            stats = self._guarded(self._import)
            if stats is not None:
                self._seen = seen
            return stats

    def _guarded(self, importing: Callable[[], ImportStats]) -> ImportStats | None:
        try:
            stats = importing()
        except (TraceFormatError, SessionError, OSError) as error:
            self._growing = self._open = self._unsettled = None  # the next poll starts afresh
            self._seen = None
            self._fail(str(error))
            return None
        self.error = None
        return stats

    def _import(self) -> ImportStats:
        if self._growing is not None:
            try:
                return self._import_grown(self._final(self._growing))
            except Rewritten as rewritten:
                self._growing = None
                self._notice(f"{rewritten}; reading it again from the start")
        name = self.format or detect_format(self.path)
        lines = line_parser(self.path, name)
        if lines is None:  # one JSON document: parsed whole, as before
            return self._import_whole(parse_trace(self.path, format=self.format))
        self._growing = GrowingTrace(self.path, name, lines)
        return self._import_grown(self._final(self._growing))

    def _final(self, growing: GrowingTrace) -> ParsedTrace:
        """The trace read now, without the records its parser holds unless ``settle`` is 0
        (they wait in ``_unsettled`` for the file to be quiet)."""
        parsed = growing.read()
        final = len(growing.records)
        if self.settle == 0 or final == len(parsed.records):
            self._unsettled = None
            return parsed
        self._unsettled = parsed
        return dataclasses.replace(
            parsed,
            digest=parsed.chain[final],  # not the file's: the file is not all imported
            records=parsed.records[:final],
            chain=parsed.chain[: final + 1],
        )

    def _import_grown(self, parsed: ParsedTrace) -> ImportStats:
        """Import a trace this follower imported before only where it goes on from there."""
        held = self._held
        if held is None or self.session is None or len(held) == 1:  # no record imported yet
            stats = self._import_whole(parsed)
        else:
            last = min(len(held), len(parsed.chain)) - 1
            if parsed.chain[last] != held[last]:
                self._notice(
                    f"{self.path} no longer begins with the records of session "
                    f"{self.session}: it is imported as another conversation"
                )
                found = find_import(self.store, parsed)
                self.session = found[0] if found and found[0] != self.session else new_id()
                stats = self._load(parsed, self.session)
            elif len(parsed.chain) <= len(held):  # nothing after what the session holds
                return already_imported(parsed)
            else:
                stats = self._load(parsed, self.session)
        self._held = parsed.chain
        return stats

    def _import_whole(self, parsed: ParsedTrace) -> ImportStats:
        found = find_import(self.store, parsed)
        if self.session is None:
            self.session = found[0] if found is not None else new_id()
        try:
            stats = self._load(parsed, self.session)
        except SessionError:
            if found is not None and found[0] != self.session:
                self.session = found[0]  # the file went back to a conversation held elsewhere
            else:  # the file now holds another conversation: it gets its own session
                self.session = new_id()
            stats = self._load(parsed, self.session)
        self._held = parsed.chain
        return stats

    def _load(self, parsed: ParsedTrace, session: str) -> ImportStats:
        entry = self._entry
        supersedes = entry[1] if entry is not None and entry[0] == session else None
        stats = import_parsed(parsed, self._graph(session), supersedes=supersedes)
        if not stats.already_imported:
            self._entry = (session, parsed.digest)
        return stats

    def _graph(self, session: str) -> ConversationGraph:
        """The session's graph, kept open between polls (loading it is most of a poll)."""
        if self._open is None or self._open.session != session:
            self._open = ConversationGraph(self.store, session)
        else:
            self._open.refresh()
        return self._open

    def _notice(self, message: str) -> None:
        self.notice = message
        if self.on_notice is not None:
            self.on_notice(message)

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
