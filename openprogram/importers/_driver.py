"""Put a parsed trace into a ``ConversationGraph``, repairing what real traces get wrong.

The whole trace is parsed before the first append (``parse_trace``), so a malformed file raises
before it has changed the graph, or before a caller has even created a session for it. Repairs
keep the graph's tool pairing valid: a result with no earlier call gets a synthetic ``unknown``
call right before it, and a call id used a second time (by a call, or by a result that arrives
again after its call was answered) gets a ``~N`` suffix, so no two calls share an id.
Sub-agent side chains become hidden ``sidechain`` functions.

Each imported record is identified by its place in the trace and a hash chained over it and
every record before it (seeded by the trace's own id). The session's meta keeps, in the same
transaction as the appends, how many records of which trace it holds and the chain at that
point. So importing a trace again adds nothing, importing it after it grew adds only the new
records, and ``find_import`` tells which session of a store already holds a trace, whatever
the file is called now or which flags the import got.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec

from graph import ConversationGraph, GraphError, Store, Tool, ToolCall
from openprogram._errors import SessionError, TraceFormatError
from openprogram.importers._detect import detect_format, read_trace
from openprogram.importers._model import Imported
from openprogram.importers._reading import Reading

__all__ = [
    "IMPORTED_KEY",
    "ImportStats",
    "ParsedTrace",
    "find_import",
    "import_parsed",
    "import_trace",
    "parse_trace",
]

_COMPACTION = {"compact_boundary": "boundary", "compact_summary": "summary"}

IMPORTED_KEY = "imported_traces"
"""Session meta key: sha256 of each trace file imported into the session → its name, format,
how many of its records the session holds (``records``) and the record chain there (``chain``)."""


class ImportStats(msgspec.Struct, frozen=True, kw_only=True):
    """What an import did: counts of what went into the graph, and what was skipped or repaired.

    ``messages`` counts appended messages of every role (markers and repairs included),
    ``tool_calls`` the calls requested, ``unanswered`` those still without a result,
    ``functions`` the side-chain function blocks, ``skipped`` malformed records dropped
    under ``skip_bad``, and ``warnings`` says what was repaired or ignored. When
    ``already_imported`` is True the session held every record of this trace already and
    nothing was added; ``held`` counts the trace's records the session held before (a trace
    that grew since its last import adds only the records after those).
    """

    session_id: str | None
    format: str
    messages: int
    tool_calls: int
    unanswered: int
    functions: int
    skipped: int
    warnings: list[str]
    already_imported: bool = False
    held: int = 0


@dataclass(frozen=True)
class ParsedTrace:
    """A whole trace read and checked, not yet in any graph: what ``import_parsed`` appends.

    ``chain[i]`` identifies the first ``i`` records: a sha256 chained over each record's
    content, seeded by the trace's format and own id (``chain[0]``)."""

    path: Path
    format: str
    digest: str
    records: list[Imported]
    reading: Reading
    chain: list[str]

    def held_by(self, meta: dict[str, Any]) -> int | None:
        """How many of this trace's records a session with this meta holds (None: none of
        this trace; the whole trace when its very file was imported before)."""
        imported = meta.get(IMPORTED_KEY)
        if not isinstance(imported, dict):
            return None
        if self.digest in imported:
            return len(self.records)
        held = [
            entry["records"]
            for entry in imported.values()
            if isinstance(entry, dict)
            and isinstance(entry.get("records"), int)
            and 0 <= entry["records"] < len(self.chain)
            and self.chain[entry["records"]] == entry.get("chain")
        ]
        return max(held, default=None)


def chain_of(source: str, records: list[Imported]) -> list[str]:
    """``ParsedTrace.chain`` of ``records``, seeded by ``source`` (format and trace id)."""
    seed = hashlib.sha256(source.encode()).hexdigest()
    return [seed, *chain_on(seed, records)]


def chain_on(link: str, records: list[Imported]) -> list[str]:
    """The links after ``link`` as ``records`` follow (a chain grown without re-hashing)."""
    chain = []
    for record in records:
        link = hashlib.sha256(link.encode() + msgspec.json.encode(record)).hexdigest()
        chain.append(link)
    return chain


def find_import(store: Store, parsed: ParsedTrace) -> tuple[str, int] | None:
    """The session of ``store`` holding the most records of this trace, and how many."""
    best: tuple[str, int] | None = None
    for info in store.sessions():
        held = parsed.held_by(store.session_meta(info.id))
        if held is not None and (best is None or held > best[1]):
            best = (info.id, held)
    return best


def parse_trace(
    path: Path | str, *, format: str | None = None, skip_bad: bool = False
) -> ParsedTrace:
    """Read a whole trace file; the format is detected when not given.

    Raises ``TraceFormatError`` for a malformed file (unless ``skip_bad``, which drops and
    counts bad records) and ``UnknownFormat`` when the format cannot be told.
    """
    path = Path(path)
    name = format or detect_format(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    reading = read_trace(path, format=name, skip_bad=skip_bad)
    records = list(reading)
    source = f"{name}:{reading.session_id or path.name}"
    return ParsedTrace(path, name, digest, records, reading, chain_of(source, records))


def import_trace(
    path: Path | str,
    graph: ConversationGraph,
    *,
    format: str | None = None,
    skip_bad: bool = False,
    append: bool = False,
) -> ImportStats:
    """Import a trace file into ``graph``: ``parse_trace`` then ``import_parsed``."""
    parsed = parse_trace(path, format=format, skip_bad=skip_bad)
    return import_parsed(parsed, graph, append=append)


def already_imported(parsed: ParsedTrace) -> ImportStats:
    """What importing a trace adds to a session that holds every record of it: nothing."""
    return ImportStats(
        session_id=parsed.reading.session_id,
        format=parsed.format,
        messages=0,
        tool_calls=0,
        unanswered=0,
        functions=0,
        skipped=len(parsed.reading.skipped),
        warnings=[],
        already_imported=True,
        held=len(parsed.records),
    )


def import_parsed(
    parsed: ParsedTrace,
    graph: ConversationGraph,
    *,
    append: bool = False,
    supersedes: str | None = None,
    resume_at: int | None = None,
) -> ImportStats:
    """Append a parsed trace to ``graph`` in one transaction: the records this session does
    not hold yet (none when it holds the whole trace).

    A session that holds another conversation is refused with ``SessionError`` unless
    ``append`` is true: mixing two traces in one session is never silent. ``supersedes`` is
    the key of an earlier import this one extends and replaces in the session's record of
    imports (a follower's last read of a growing file), so that record does not grow with
    every poll. ``resume_at`` says the graph's head follows the trace's first ``resume_at``
    records, whatever the record of imports says: a follower that forked the session back
    past a response it imported unfinished loads the rest from there.

    A record the graph refuses raises ``TraceFormatError``; the batch is rolled back, in the
    store and in ``graph`` alike, so nothing of the trace remains. Readers check records the
    way the graph does, so a refusal here means an importer let through what it should not have.
    """
    reading = parsed.reading
    loader = _Loader(graph, forked=resume_at is not None)
    with graph.batch():
        # An empty update takes the session row's lock first, so two imports of one file into
        # one session cannot both find it missing.
        meta = graph.store.update_session_meta(graph.session, {})
        imported = meta.get(IMPORTED_KEY)
        imported = imported if isinstance(imported, dict) else {}
        held = parsed.held_by(meta) if resume_at is None else resume_at
        if held is None and len(graph) and not append:
            raise SessionError(
                f"session {graph.session} already holds another conversation; import "
                f"{parsed.path.name} into a new session, or append it on purpose (--append)"
            )
        held = held or 0
        if held == len(parsed.records) and (held or parsed.digest in imported):
            return already_imported(parsed)
        try:
            loader.load(parsed.records[held:])
        except (GraphError, RecursionError) as error:
            where = f"record {held + loader.records} (after parsing)"
            raise TraceFormatError(
                str(parsed.path), where, f"the graph refused it: {error}"
            ) from None
        entry = {
            "file": parsed.path.name,
            "format": parsed.format,
            "records": len(parsed.records),
            "chain": parsed.chain[-1],
        }
        kept = {key: value for key, value in imported.items() if key != supersedes}
        kept[parsed.digest] = entry
        graph.store.update_session_meta(graph.session, {IMPORTED_KEY: kept})
    return ImportStats(
        session_id=reading.session_id,
        format=parsed.format,
        messages=loader.messages,
        tool_calls=loader.tool_calls,
        unanswered=sum(len(queue) for queue in loader.pending.values()),
        functions=loader.functions,
        skipped=len(reading.skipped),
        warnings=[*reading.warnings, *loader.warnings],
        held=held,
    )


class _Loader:
    """Appends records and keeps track of pending calls, so it can repair their pairing."""

    def __init__(self, graph: ConversationGraph, *, forked: bool = False) -> None:
        self.graph = graph
        self.pending: dict[str, deque[str]] = {}  # trace call id -> graph call ids, oldest first
        self.records = 0
        self.messages = 0
        self.tool_calls = 0
        self.functions = 0
        self.warnings: list[str] = []
        nodes = [s.node for s in graph.visible(expose="full")] if forked else graph.nodes()
        self.used: set[str] = {
            node.payload.call_id for node in nodes if isinstance(node.payload, Tool)
        }
        if forked:  # a forked-off branch's calls are free, unless pending (the graph refuses)
            self.used.update(graph.state.pending)

    def load(self, records: list[Imported]) -> None:
        for sidechain, run in groupby(records, key=attrgetter("sidechain")):
            if sidechain:
                self.sidechain(list(run))
            else:
                for record in run:
                    self.add(record)

    def sidechain(self, run: list[Imported]) -> None:
        """A contiguous run of side-chain records, as a hidden function node."""
        with self.graph.function("sidechain", expose="hidden", at=run[0].at) as fn:
            for record in run:
                self.add(record)
            replies = [r.message["content"] for r in run if r.message["role"] == "assistant"]
            fn.output = next((text for text in reversed(replies) if text), None)
        self.functions += 1

    def add(self, record: Imported) -> None:
        self.records += 1
        message, meta = record.message, record.meta
        if record.marker in _COMPACTION:
            meta = meta | {"native_compaction": _COMPACTION[record.marker]}
        if message["role"] == "tool":
            message = message | {"tool_call_id": self._answer(message["tool_call_id"], record)}
        elif message.get("tool_calls"):
            taken: set[str] = set()
            message = message | {
                "tool_calls": [self._request(c, taken) for c in message["tool_calls"]]
            }
        self.graph.append(message, at=record.at, meta=meta)
        self.messages += 1

    def _request(self, call: ToolCall, taken: set[str]) -> ToolCall:
        """The call with an id the graph accepts: not pending, not used earlier in the message."""
        trace_id = call["id"]
        graph_id, n = trace_id, 1
        while graph_id in self.used or graph_id in taken:
            n += 1
            graph_id = f"{trace_id}~{n}"
        taken.add(graph_id)
        if graph_id != trace_id:
            self._warn(f"call id {trace_id!r} used twice; the later call is stored as {graph_id!r}")
        self.used.add(graph_id)
        self.pending.setdefault(trace_id, deque()).append(graph_id)
        self.tool_calls += 1
        return call | {"id": graph_id}

    def _answer(self, trace_id: str, record: Imported) -> str:
        queue = self.pending.get(trace_id)
        if queue:
            return queue.popleft()
        if trace_id in self.graph.state.pending:
            return trace_id  # a call made before this import started
        graph_id, n = trace_id, 1
        while graph_id in self.used:  # never an id a call of this session already has
            n += 1
            graph_id = f"{trace_id}~{n}"
        self.used.add(graph_id)
        if graph_id == trace_id:
            self._warn(f"tool result {trace_id!r} answers no earlier call; added a synthetic call")
        else:
            self._warn(
                f"tool result {trace_id!r} arrived again after its call was answered; kept "
                f"as the result of a synthetic call {graph_id!r}"
            )
        function = {"name": "unknown", "arguments": "{}"}
        synthetic = {"id": graph_id, "type": "function", "function": function}
        repair = {"role": "assistant", "content": "", "tool_calls": [synthetic]}
        self.graph.append(repair, at=record.at, meta={"synthetic": "orphan_tool_result"})
        self.messages += 1
        self.tool_calls += 1
        return graph_id

    def _warn(self, note: str) -> None:
        self.warnings.append(note)
