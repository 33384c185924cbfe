"""``CompactionRecord``: one per new compaction decision — to the database, a JSONL log and
callbacks.

The database copy (through the store's side log, see ``_storage``) is the one other hosts
and ``openprogram records`` read. The JSONL file (``<state_dir>/records/<session>.jsonl``)
is an append-only log for people and tools with file access; reading it skips a damaged
line (a torn write, a hand edit) with a warning that names it, and never loses the rest.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from graph import is_safe_id

from .._errors import RecordError, StateDirError
from ._facts import RecordFacts, facts_of
from ._files import append_lines, read_regular


class CompactionRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What one compaction decision did."""

    id: str
    session: str
    timestamp: str
    tier: str
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    offloaded: list[dict[str, Any]] = msgspec.field(default_factory=list)
    summarized: int = 0
    preserved: int = 0
    summary: str | None = None
    anchors: dict[str, Any] | None = None
    ratio: float = 1.0
    duration_ms: float = 0.0
    error: str | None = None
    details: dict[str, Any] = msgspec.field(default_factory=dict)
    render: str | None = None
    """The render it was decided in: its receipt's id when the prompt was sent (None in
    records written before renders had ids)."""
    frame: str | None = None
    """The frame that render was in (None: the top level)."""
    head: str | None = None
    """The head a manual operation (``compact``, ``rollback``) acted at."""
    clock: str | None = None
    """The render's own clock: a replay's is the trace's time (``timestamp`` is the wall
    clock when it was decided); None in records written before."""

    @property
    def facts(self) -> RecordFacts | None:
        """``details`` typed by ``tier`` (see ``RecordFacts``); None for a custom tier's."""
        return facts_of(self.tier, self.details)

    def _repr_html_(self) -> str:
        from graph import html_table

        return html_table(
            f"{self.tier} record {self.id}",
            [
                ("time", self.timestamp),
                ("tokens", f"{self.tokens_before:,} → {self.tokens_after:,} ({self.ratio:.0%})"),
                ("messages", f"{self.messages_before} → {self.messages_after}"),
                ("summary", self.summary),
                ("offloaded", self.offloaded),
                ("details", self.details),
                ("error", self.error),
            ],
        )


def wall_clock() -> str:
    """Now, as records stamp it (UTC, ISO 8601)."""
    return datetime.now(UTC).isoformat()


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(CompactionRecord)


def encode_record(record: CompactionRecord) -> bytes:
    return _encoder.encode(record)


def decode_record(data: bytes | str) -> CompactionRecord:
    return _decoder.decode(data)


def records_path(state_dir: Path, session: str) -> Path:
    if not is_safe_id(session):
        raise RecordError(f"session id {session!r} cannot name a records file")
    return state_dir / "records" / f"{session}.jsonl"


def append_jsonl(state_dir: Path, session: str, records: list[CompactionRecord]) -> None:
    """Append records to the session's log, each on a line of its own."""
    if not is_safe_id(session):
        raise RecordError(f"session id {session!r} cannot name a records file")
    append_lines(state_dir, ["records"], f"{session}.jsonl", [encode_record(r) for r in records])


def read_jsonl(path: Path) -> Iterator[CompactionRecord]:
    """Records in file order; a line that is not a record is skipped with a warning that
    names it (``path:line``), so one damaged line never hides the others. A path that is
    not a regular file (a FIFO, a device) or has a second name (a hardlink) is refused with
    :class:`RecordError` at once, never waited on or read."""
    if not path.exists():
        return
    try:
        data = read_regular(path)
    except StateDirError as error:
        raise RecordError(str(error)) from error
    for index, line in enumerate(data.split(b"\n")):
        if not line.strip():
            continue
        try:
            yield _decoder.decode(line)
        except msgspec.DecodeError as error:
            warnings.warn(
                f"{path}:{index + 1}: skipping a line that is not a compaction record ({error})",
                RuntimeWarning,
                stacklevel=2,
            )
