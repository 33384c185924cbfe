"""Put a parsed trace into a ``ConversationGraph``, repairing what real traces get wrong.

The whole trace is parsed before the first append (``parse_trace``), so a malformed file raises
before it has changed the graph, or before a caller has even created a session for it. Repairs
keep the graph's tool pairing valid: a result with no earlier call gets a synthetic ``unknown``
call right before it, and a call id used a second time (by a call, or by a result that arrives
again after its call was answered) gets a ``~N`` suffix, so no two calls share an id.
Sub-agent side chains become hidden ``sidechain`` functions.

Each import records the trace file's sha256 in the session's meta, in the same transaction as
its appends, so importing the same file into the same session again is a no-op, not a copy.
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

from graph import ConversationGraph, GraphError, Tool
from openprogram._errors import TraceFormatError
from openprogram.importers._detect import detect_format, read_trace
from openprogram.importers._model import Imported
from openprogram.importers._reading import Reading

__all__ = [
    "IMPORTED_KEY",
    "ImportStats",
    "ParsedTrace",
    "import_parsed",
    "import_trace",
    "parse_trace",
]

_COMPACTION = {"compact_boundary": "boundary", "compact_summary": "summary"}

IMPORTED_KEY = "imported_traces"
"""Session meta key: sha256 of each trace file imported into the session → its name and format."""


class ImportStats(msgspec.Struct, frozen=True, kw_only=True):
    """What an import did: counts of what went into the graph, and what was skipped or repaired.

    ``messages`` counts appended messages of every role (markers and repairs included),
    ``tool_calls`` the calls requested, ``unanswered`` those still without a result,
    ``functions`` the side-chain function blocks, ``skipped`` malformed records dropped
    under ``skip_bad``, and ``warnings`` says what was repaired or ignored. When
    ``already_imported`` is True the session held this very file already and nothing was added.
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


@dataclass(frozen=True)
class ParsedTrace:
    """A whole trace read and checked, not yet in any graph: what ``import_parsed`` appends."""

    path: Path
    format: str
    digest: str
    records: list[Imported]
    reading: Reading


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
    return ParsedTrace(path, name, digest, list(reading), reading)


def import_trace(
    path: Path | str,
    graph: ConversationGraph,
    *,
    format: str | None = None,
    skip_bad: bool = False,
) -> ImportStats:
    """Import a trace file into ``graph``: ``parse_trace`` then ``import_parsed``."""
    return import_parsed(parse_trace(path, format=format, skip_bad=skip_bad), graph)


def import_parsed(parsed: ParsedTrace, graph: ConversationGraph) -> ImportStats:
    """Append a parsed trace to ``graph`` in one transaction, unless this session has it already.

    A record the graph refuses raises ``TraceFormatError``; the batch is rolled back, in the
    store and in ``graph`` alike, so nothing of the trace remains. Readers check records the
    way the graph does, so a refusal here means an importer let through what it should not have.
    """
    reading = parsed.reading
    loader = _Loader(graph)
    with graph.batch():
        # An empty update takes the session row's lock first, so two imports of one file into
        # one session cannot both find it missing.
        meta = graph.store.update_session_meta(graph.session, {})
        imported = meta.get(IMPORTED_KEY)
        imported = imported if isinstance(imported, dict) else {}
        if parsed.digest in imported:
            return ImportStats(
                session_id=reading.session_id,
                format=parsed.format,
                messages=0,
                tool_calls=0,
                unanswered=0,
                functions=0,
                skipped=len(reading.skipped),
                warnings=[],
                already_imported=True,
            )
        try:
            loader.load(parsed.records)
        except (GraphError, RecursionError) as error:
            where = f"record {loader.records} (after parsing)"
            raise TraceFormatError(
                str(parsed.path), where, f"the graph refused it: {error}"
            ) from None
        entry = {"file": parsed.path.name, "format": parsed.format}
        graph.store.update_session_meta(
            graph.session, {IMPORTED_KEY: {**imported, parsed.digest: entry}}
        )
    return ImportStats(
        session_id=reading.session_id,
        format=parsed.format,
        messages=loader.messages,
        tool_calls=loader.tool_calls,
        unanswered=sum(len(queue) for queue in loader.pending.values()),
        functions=loader.functions,
        skipped=len(reading.skipped),
        warnings=[*reading.warnings, *loader.warnings],
    )


class _Loader:
    """Appends records and keeps track of pending calls, so it can repair their pairing."""

    def __init__(self, graph: ConversationGraph) -> None:
        self.graph = graph
        self.pending: dict[str, deque[str]] = {}  # trace call id -> graph call ids, oldest first
        self.records = 0
        self.messages = 0
        self.tool_calls = 0
        self.functions = 0
        self.warnings: list[str] = []
        self.used: set[str] = {
            node.payload.call_id for node in graph.nodes() if isinstance(node.payload, Tool)
        }

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

    def _request(self, call: dict[str, Any], taken: set[str]) -> dict[str, Any]:
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
