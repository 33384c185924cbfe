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
at a time) is imported only once the file has been quiet for ``settle`` seconds; the records
before it are imported at once. A stored node never changes, so when a response imported
that way goes on later (a long tool call streams for longer than ``settle``), the session is
forked back to where it began and the response is imported again whole, as a one-shot import
would have it; the unfinished one stays on a side branch.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from graph import ConversationGraph, Store, Tool, new_id
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

ABANDONED = "[not run here: this response was imported again whole on another branch]"
"""The result a call of a response imported before its end gets once it is imported again."""


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
        self._unsettled: tuple[ParsedTrace, int] | None = None
        """The last read and how many of its records are final, when the others (records its
        parser holds) are not imported yet."""
        self._tail: tuple[int, str | None] | None = None
        """(records, head) when the session's newest records are ones the parser held: the
        trace's records before them, and the node they were appended after."""
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
                return self._guarded(lambda: self._import_grown(*settled))
            self._changed_at = self.clock()
            stats = self._guarded(self._import)
            if stats is not None:
                self._seen = seen
            return stats

    def _guarded(self, importing: Callable[[], ImportStats]) -> ImportStats | None:
        try:
            stats = importing()
        except (TraceFormatError, SessionError, OSError) as error:
            self._growing = self._open = self._unsettled = self._tail = None  # start afresh
            self._seen = None
            self._fail(str(error))
            return None
        self.error = None
        return stats

    def _import(self) -> ImportStats:
        if self._growing is not None:
            try:
                return self._import_grown(*self._final(self._growing))
            except Rewritten as rewritten:
                self._growing = None
                self._notice(f"{rewritten}; reading it again from the start")
        name = self.format or detect_format(self.path)
        lines = line_parser(self.path, name)
        if lines is None:  # one JSON document: parsed whole, as before
            return self._import_whole(parse_trace(self.path, format=self.format))
        self._growing = growing = GrowingTrace(self.path, name, lines)
        return self._import_grown(*self._final(growing))

    def _final(self, growing: GrowingTrace) -> tuple[ParsedTrace, int]:
        """The trace read now and how many of its records are final, without the records its
        parser holds unless ``settle`` is 0 (they wait in ``_unsettled`` for the file to be
        quiet)."""
        parsed = growing.read()
        final = len(growing.records)
        if self.settle == 0 or final == len(parsed.records):
            self._unsettled = None
            return parsed, final
        self._unsettled = parsed, final
        return _first(parsed, final), final

    def _import_grown(self, parsed: ParsedTrace, final: int) -> ImportStats:
        """Import a trace this follower imported before only where it goes on from there
        (the first ``final`` records of ``parsed`` are final, the others the parser holds)."""
        if final < len(parsed.records) and (self._tail is None or self._tail[0] != final):
            before = self._import_grown(_first(parsed, final), final)  # held ones: at a node
            assert self.session is not None
            self._tail = (final, self._graph(self.session).head)
            return _joined(before, self._import_grown(parsed, final))
        held, tail = self._held, self._tail
        if held is None or self.session is None or len(held) == 1:  # no record imported yet
            stats = self._import_whole(parsed)
        else:
            last = min(len(held), len(parsed.chain)) - 1
            diverged = parsed.chain[last] != held[last]
            if diverged and tail and tail[0] < last and parsed.chain[tail[0]] == held[tail[0]]:
                stats = self._import_again(parsed, *tail)
            elif diverged:
                self._notice(
                    f"{self.path} no longer begins with the records of session "
                    f"{self.session}: it is imported as another conversation"
                )
                found = find_import(self.store, parsed)
                self.session = found[0] if found and found[0] != self.session else new_id()
                stats = self._load(parsed, self.session)
                self._tail = None
            elif len(parsed.chain) <= len(held):  # nothing after what the session holds
                return already_imported(parsed)
            else:
                stats = self._load(parsed, self.session)
        self._held = parsed.chain
        if final == len(parsed.records):
            self._tail = None
        return stats

    def _import_again(self, parsed: ParsedTrace, records: int, head: str | None) -> ImportStats:
        """Records the parser held, imported before, went on: fork the session back to
        ``head``, which follows the trace's first ``records`` records, and import the rest."""
        assert self.session is not None
        graph = self._graph(self.session)
        abandoned = _calls_after(graph, head)
        if head is None:
            graph.restart()
        else:
            graph.fork(head)
        for call_id in abandoned:  # its calls are made again on the new branch
            graph.append(
                {"role": "tool", "tool_call_id": call_id, "content": ABANDONED, "is_error": True},
                meta={"synthetic": "abandoned_call"},
            )
        self._notice(
            f"{self.path}: a response imported before its end went on; it is imported again "
            f"whole from record {records + 1}, and what was imported of it stays on a side "
            "branch"
        )
        return self._load(parsed, self.session, resume_at=records)

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

    def _load(self, parsed: ParsedTrace, session: str, resume_at: int | None = None) -> ImportStats:
        entry = self._entry
        supersedes = entry[1] if entry is not None and entry[0] == session else None
        graph = self._graph(session)
        stats = import_parsed(parsed, graph, supersedes=supersedes, resume_at=resume_at)
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


def _calls_after(graph: ConversationGraph, head: str | None) -> list[str]:
    """The pending calls of the chain nodes after ``head`` up to the graph's head."""
    calls, pending = [], graph.state.pending
    node = graph.head
    while node is not None and node != head:
        for tool in graph.tools(node):
            if isinstance(tool.payload, Tool) and pending.get(tool.payload.call_id) == tool.id:
                calls.append(tool.payload.call_id)
        predecessor = graph.predecessor(node)
        node = None if predecessor is None else predecessor.id
    return calls


def _first(parsed: ParsedTrace, records: int) -> ParsedTrace:
    """``parsed`` cut after its first ``records`` records."""
    return dataclasses.replace(
        parsed,
        digest=parsed.chain[records],  # not the file's: the file is not all imported
        records=parsed.records[:records],
        chain=parsed.chain[: records + 1],
    )


def _joined(first: ImportStats, then: ImportStats) -> ImportStats:
    """One poll's stats from the two imports it made."""
    if then.already_imported:
        return first
    if first.already_imported:
        return then
    return msgspec.structs.replace(
        then,
        messages=first.messages + then.messages,
        tool_calls=first.tool_calls + then.tool_calls,
        functions=first.functions + then.functions,
        warnings=[*first.warnings, *then.warnings],
        held=first.held,
    )
