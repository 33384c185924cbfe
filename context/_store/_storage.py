"""The one persistence seam of ``context``: records, token counts and tier state.

Everything goes through the graph store's side data (``graph.SideData``: ``get_values``/
``put_values``, ``append_log``/``read_log``), which the memory store and the SQL store both
implement, so no code here knows which store it has, nor writes SQL. ``context`` lists its
side-data migrations explicitly and applies them when a :class:`ContextStorage` first opens
a store.

Writing fails open: a record that could not be written (database down, disk full, a
symlinked records folder) is kept and retried on the next write, and the caller is told.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Collection, Mapping, Sequence
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from graph import GraphError, SideData, SideImport, SideMigration, ToolSchema

from .._errors import ContextError, PartialAppend, RecordError
from ._folder import StateFolder, state_folder
from ._receipt import ProviderUsage, RenderReceipt
from ._receipt_log import LAST, ReceiptLog
from ._receipt_log import RECEIPTS as RECEIPTS  # the namespace, for those who read it
from ._records import (
    CompactionRecord,
    append_jsonl,
    decode_record,
    encode_record,
    read_jsonl,
    records_path,
)

RECORDS = "context.records"
STATE = "context.state"
TOOLS = "context.tools"
"""Tool schemas by digest: a receipt names them, a second process renders with them."""
MESSAGES = "context.messages"
"""Sent messages (canonical JSON) by digest, once per session: receipts name them in
order, so the prompt as sent is read back exactly."""
USAGE = "context.usage"
"""The provider's usage of each receipt's call, by receipt id (it comes after the receipt:
the answer reports it)."""
CONFIG = "context.config"
"""The log of configuration events; each one starts a new epoch of tier state."""
EPOCH = "~epoch"


_usage = msgspec.json.Decoder(ProviderUsage)


def _tokens(encoding: str) -> str:
    return f"context.tokens.{encoding}"


def _move_old_tables(side: SideImport) -> None:
    """Databases written before the seam kept records and counts in tables of their own;
    copy them into side data and drop the old ones (nothing is lost)."""
    tables = side.tables()
    if "context_records" in tables:
        rows = side.rows("context_records", ("session", "id", "seq", "body"), order_by="seq")
        side.append_logs((session, RECORDS, key, seq, body) for session, key, seq, body in rows)
        side.drop("context_records")
    if "context_token_cache" in tables:
        rows = side.rows("context_token_cache", ("session", "encoding", "key", "tokens"))
        side.put_values(
            (session, _tokens(encoding), key, str(tokens))
            for session, encoding, key, tokens in rows
        )
        side.drop("context_token_cache")


CONTEXT_MIGRATIONS: tuple[SideMigration, ...] = (
    SideMigration("context_0003_side_tables", _move_old_tables),
)
"""The context package's side-data migrations, in order (0001 and 0002 made the old
tables)."""


class ContextStorage:
    """A session's context data in its graph store, with fail-open, retried record writes.

    The database holds the records; the JSONL file is a log copied from it after each
    commit and caught up on open (``catch_up_log``), so the database is the one source.
    A reader (``migrate=False``) never changes the database's schema.
    """

    def __init__(
        self,
        store: SideData,
        session: str,
        state_dir: StateFolder | str | os.PathLike[str] | None = None,
        *,
        migrate: bool = True,
    ) -> None:
        self.store = store
        self.session = session
        self.folder = (
            state_dir if isinstance(state_dir, StateFolder) else state_folder(store, state_dir)
        )
        if migrate:
            store.migrate_side(CONTEXT_MIGRATIONS)
        self._unsaved: list[tuple[CompactionRecord, int]] = []
        self._unlogged: list[CompactionRecord] = []
        self._receipts = ReceiptLog(store, session)
        self._known: set[str] = set()
        """Message digests this process has seen stored (committed): not asked for again.
        One written now becomes known when a later save finds it, so a transaction that
        rolls back never leaves a digest known but missing."""
        self._known_tools: set[str] = set()
        """Tool schema digests this process has seen stored, as ``_known``."""

    # -- token counts -----------------------------------------------------------------
    def load_tokens(self, encoding: str, keys: Collection[str] | None = None) -> dict[str, int]:
        """Stored token counts: all of them, or those of ``keys``."""
        values = self.store.get_values(self.session, _tokens(encoding), keys)
        return {key: int(value) for key, value in values.items()}

    def save_tokens(self, encoding: str, counts: Mapping[str, int]) -> None:
        if counts:
            values = {key: str(tokens) for key, tokens in counts.items()}
            self.store.put_values(self.session, _tokens(encoding), values)

    # -- tier state ---------------------------------------------------------------------
    def load_state(self, key: str) -> str | None:
        return self.store.get_values(self.session, STATE, [key]).get(key)

    def save_state(self, key: str, value: str) -> None:
        self.store.put_values(self.session, STATE, {key: value})

    # -- configuration epochs -----------------------------------------------------------
    def epoch(self) -> int:
        """How many configuration events the session has had: tier state is kept per
        epoch and frame, so only an explicit, recorded change drops it."""
        found = self.store.get_values(self.session, STATE, [EPOCH]).get(EPOCH)
        return int(found) if found else 0

    def configure(self, changes: Mapping[str, Any], *, new_epoch: bool = True) -> int:
        """Record a configuration event (what changed, in JSON); with ``new_epoch`` (a
        change of what renders: the policy or the budget) start a new epoch, so tier state
        of earlier epochs is no longer read. Returns the epoch now."""
        with self.store.transaction():
            epoch = self.epoch() + (1 if new_epoch else 0)
            count = len(self.store.read_log(self.session, CONFIG))
            body = {"epoch": epoch, "at": _now(), "changes": dict(changes)}
            text = json.dumps(body, sort_keys=True, default=str)
            self.store.append_log(self.session, CONFIG, [(f"change-{count + 1}", text)], 0)
            if new_epoch:
                self.store.put_values(self.session, STATE, {EPOCH: str(epoch)})
        return epoch

    def configurations(self) -> list[dict[str, Any]]:
        """The recorded configuration events, oldest first."""
        return [json.loads(e.body) for e in self.store.read_log(self.session, CONFIG)]

    # -- render receipts ----------------------------------------------------------------
    def save_receipt(
        self,
        receipt: RenderReceipt,
        tools: Sequence[ToolSchema],
        messages: Mapping[str, str] | None = None,
        *,
        atomic: bool = True,
    ) -> None:
        """Keep what one LLM call was sent: the receipt (logged, and as the last one of its
        frame and of the session, as the changes since an earlier one: ``_receipt_log``),
        its tool schemas, once per digest, and its messages (``messages``: canonical JSON
        by digest), each once per session. All in one transaction of its own (a savepoint
        inside the caller's); ``atomic=False``: in the caller's, which holds them all or
        none already (a render's commit hook)."""
        with self.store.transaction() if atomic else nullcontext():
            if messages:
                self._save_messages(messages)
            self._save_tools(receipt.tools_digest, tools)
            self._receipts.write(receipt)

    def _save_tools(self, digest: str, tools: Sequence[ToolSchema]) -> None:
        if digest in self._known_tools:
            return
        if self.store.get_values(self.session, TOOLS, [digest]):
            self._known_tools.add(digest)
        else:
            schemas = json.dumps(list(tools), sort_keys=True, ensure_ascii=False)
            self.store.put_values(self.session, TOOLS, {digest: schemas})

    def _save_messages(self, messages: Mapping[str, str]) -> None:
        if not messages.keys() - self._known:  # in C: mostly every one is known
            return
        unknown = [digest for digest in messages if digest not in self._known]
        stored = self.store.get_values(self.session, MESSAGES, unknown)
        new = {digest: messages[digest] for digest in unknown if digest not in stored}
        if new:
            self.store.put_values(self.session, MESSAGES, new)
        self._known.update(stored)

    def messages(self, digests: Collection[str]) -> dict[str, str]:
        """Stored sent messages (canonical JSON) by digest; those not stored are left out."""
        return self.store.get_values(self.session, MESSAGES, list(dict.fromkeys(digests)))

    def last_receipt(self, frame: str | bool | None = True) -> RenderReceipt | None:
        """The last receipt of the session (``frame=True``) or of one frame."""
        key = LAST if frame is True else (frame or "-")
        receipt = self._receipts.last(str(key))
        if receipt is None:
            return None
        return self._with_usage([receipt], [receipt.id])[0]

    def receipts(self) -> list[RenderReceipt]:
        """Every receipt, oldest first (with the provider's usage once it was reported)."""
        return self._with_usage(self._receipts.all())

    def put_usage(self, receipt: str, usage: ProviderUsage) -> None:
        """What the provider reported for the call ``receipt`` sent (its answer came after
        the receipt was written): receipts are read back with it."""
        text = msgspec.json.encode(usage).decode()
        self.store.put_values(self.session, USAGE, {receipt: text})

    def _with_usage(
        self, receipts: list[RenderReceipt], ids: list[str] | None = None
    ) -> list[RenderReceipt]:
        stored = self.store.get_values(self.session, USAGE, ids)
        if not stored:
            return receipts
        return [
            msgspec.structs.replace(r, usage=_usage.decode(stored[r.id])) if r.id in stored else r
            for r in receipts
        ]

    def last_tools(self) -> list[ToolSchema]:
        """The tool schemas of the last prompt sent (none: no receipt yet)."""
        receipt = self.last_receipt()
        return (self.tools(receipt.tools_digest) or []) if receipt is not None else []

    def tools(self, digest: str) -> list[ToolSchema] | None:
        """The tool schemas a receipt names (None: not stored)."""
        found = self.store.get_values(self.session, TOOLS, [digest]).get(digest)
        if found is None:
            return None
        value = json.loads(found)
        return value if isinstance(value, list) else None

    # -- records ------------------------------------------------------------------------
    def write_records(self, records: list[CompactionRecord], seq: int) -> None:
        """Append records (and any whose earlier write failed) to the database; raises
        what the store raises, inside the caller's transaction."""
        pending = [*self._unsaved, *((record, seq) for record in records)]
        by_seq: dict[int, list[CompactionRecord]] = {}
        for record, at in pending:
            by_seq.setdefault(at, []).append(record)
        for at, group in by_seq.items():
            entries = [(r.id, encode_record(r).decode()) for r in group]
            self.store.append_log(self.session, RECORDS, entries, at)

    def written(self) -> None:
        """The transaction holding ``write_records`` committed: nothing is owed to it."""
        self._unsaved.clear()

    def owe(self, records: list[CompactionRecord], seq: int) -> None:
        """Records whose transaction failed: written with the next commit."""
        known = {record.id for record, _ in self._unsaved}
        self._unsaved.extend((r, seq) for r in records if r.id not in known)

    def log_records(self, records: list[CompactionRecord]) -> list[str]:
        """Copy committed records to the JSONL log (fail-open: what fails is kept for the
        next call); returns what went wrong, in words."""
        self._unlogged.extend(records)
        if not self._unlogged:
            return []
        try:
            append_jsonl(self.folder.claim(), self.session, self._unlogged)
        except PartialAppend as error:
            del self._unlogged[: error.written]  # those made it whole: never twice
            return [f"{len(self._unlogged)} record(s) not in the JSONL log: {error}"]
        except (ContextError, OSError) as error:
            return [f"{len(self._unlogged)} record(s) not in the JSONL log: {error}"]
        self._unlogged.clear()
        return []

    def catch_up_log(self) -> list[str]:
        """Append to the JSONL log the database's records it lacks (a process that died
        between its commit and its log line, another host's records)."""
        try:
            stored = self.read_records()
            path = records_path(self.state_dir, self.session)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # damaged lines: said on read
                logged = {record.id for record in read_jsonl(path)}
        except (GraphError, ContextError, OSError):
            return []  # the next commit's log write says what is wrong with the file
        missing = [record for record in stored if record.id not in logged]
        return self.log_records(missing) if missing else []

    def save_records(self, records: list[CompactionRecord], seq: int) -> list[str]:
        """Write records to the database, then to the JSONL log, each fail-open; what fails
        is kept for the next call. Returns what went wrong, in words (empty when all ok)."""
        problems: list[str] = []
        try:
            with self.store.transaction():
                self.write_records(records, seq)
        except (GraphError, OSError) as error:
            self.owe(records, seq)
            problems.append(f"{len(self._unsaved)} record(s) not in the database: {error}")
        else:
            self.written()
        return problems + self.log_records(records)

    @property
    def pending(self) -> int:
        """Records written nowhere yet or only to one place (retried on the next write)."""
        return len({r.id for r, _ in self._unsaved} | {r.id for r in self._unlogged})

    @property
    def state_dir(self) -> Path:
        return self.folder.path

    def read_records(self) -> list[CompactionRecord]:
        """The session's records from the database, oldest first."""
        found = []
        for entry in self.store.read_log(self.session, RECORDS):
            try:
                found.append(decode_record(entry.body))
            except Exception as error:
                raise RecordError(
                    f"record {entry.key} of session {self.session!r} is damaged: {error}"
                ) from error
        return found


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
