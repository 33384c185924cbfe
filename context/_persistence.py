"""What an engine keeps between renders and between processes: per-frame state, token
counts, records and the layout checkpoint (the persistence half of ``ContextEngine``).

A render's decisions are written by ``_commit`` (see ``_commit.py`` for the order). Tier
state is saved per configuration epoch and frame; the main frame's state also
carries the layout checkpoint (``_checkpoint``), so a fresh engine builds only the units
that a persisted layer does not hide. Token counts are read by key for the units a render
builds, never all of a long session's at once unless a full walk needs them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from graph import GraphError, GraphReader, LayerError, Node

from ._checkpoint import Checkpoint, capture
from ._commit import Decision, Redo, SessionWriter
from ._errors import OffloadError
from ._files import write_text_once
from ._layout import Layout
from ._names import RESULT_VARIANTS, Variant
from ._offload import mark_failed
from ._records import CompactionRecord
from ._redaction import clean_records
from ._storage import ContextStorage
from ._tier import Tier, TierContext, TierState
from ._tokens import TokenCache, TokenCounter, UsageAnchor
from ._view import RawUnit, View

if TYPE_CHECKING:
    from ._folder import StateFolder
    from ._layers import LayerBook
    from ._policy import Policy
    from ._rendered import Rendered

LAYOUT = "~layout"
"""Key of the layout checkpoint in a frame's saved state (no tier has that name)."""
LOAD_ALL_KEYS = 4_096
"""A render that builds more units' items than this reads every stored count at once."""


@dataclass
class _Frame:
    """What an engine keeps for one frame between renders."""

    layout: Layout = field(default_factory=Layout)
    states: dict[str, TierState] = field(default_factory=dict)
    scratch: dict[str, dict[str, Any]] = field(default_factory=dict)
    saved: bytes = b""
    checkpoint: Checkpoint | None = None
    """Where a fresh engine may start its layout (saved with the tier state)."""
    restore: Checkpoint | None = None
    """The checkpoint loaded with the state, offered to the layout's first walk."""
    captured: tuple[object, ...] = ()


class EngineStorage:
    """The persistence half of :class:`~context.ContextEngine`."""

    if TYPE_CHECKING:
        graph: GraphReader
        policy: Policy
        storage: ContextStorage | None
        cache: TokenCache
        counter: TokenCounter
        anchor: UsageAnchor
        tiers: list[Tier]
        callbacks: list[Callable[[CompactionRecord], None]]
        _frames: dict[str | None, _Frame]
        _records: list[CompactionRecord]
        _state_key: str
        _stored_upto: int
        writer: SessionWriter | None
        folder: StateFolder
        book: LayerBook
        fences: list[Callable[[], None]]
        commit_hooks: list[Callable[[Rendered], None]]
        _owed: list[str]

    def _load(self) -> None:
        if self.storage is None:
            return
        storage, encoding = self.storage, self.counter.encoding_name
        self.cache.loader = lambda keys: storage.load_tokens(encoding, keys)
        saved = self.storage.load_state(f"{self._state_key}:anchor")
        if saved:
            ratio, reports, *rest = msgspec.json.decode(saved)
            self.anchor.restore(float(ratio), int(reports), *rest)
        if self.writer is not None:
            self._owed.extend(self.storage.catch_up_log())

    def _frame(self, frame: str | None) -> _Frame:
        found = self._frames.get(frame)
        if found is not None:
            return found
        found = self._frames[frame] = _Frame()
        if self.storage is not None:
            saved = self.storage.load_state(f"{self._state_key}:{frame or '-'}")
            if saved:
                found.saved = saved.encode()
                found.states = self._states(found.saved)
                raw = msgspec.json.decode(saved)
                if frame is None and LAYOUT in raw:
                    try:
                        found.restore = msgspec.convert(raw[LAYOUT], Checkpoint)
                    except msgspec.ValidationError:  # an older shape: walk in full
                        found.restore = None
                    found.checkpoint = found.restore
        return found

    def _states(self, saved: bytes) -> dict[str, TierState]:
        """Tier states as saved (what a refused commit goes back to)."""
        if not saved:
            return {}
        raw = msgspec.json.decode(saved)
        return {
            tier.name: msgspec.convert(raw[tier.name], tier.state)
            for tier in self.tiers
            if tier.name in raw
        }

    def _state_value(self, frame: _Frame) -> bytes:
        values = {name: msgspec.to_builtins(value) for name, value in frame.states.items()}
        if frame.checkpoint is not None:
            values[LAYOUT] = msgspec.to_builtins(frame.checkpoint)
        return msgspec.json.encode(dict(sorted(values.items())))

    def _commit(self, decision: Decision, rendered: Rendered | None = None) -> list[str]:
        """Write what ``decision`` decided: files, then one transaction, then the log.

        Raises :class:`Redo` when the transaction refused it (a conflict with another
        writer, checked under the session's lock) or a file could not be written; a
        database that is down fails open (the decisions are kept and written with the
        next commit). Returns what went wrong in words (empty when all is well)."""
        ctx, frame = decision.ctx, decision.frame
        ctx.records[:] = clean_records(ctx.records, self.policy, self.graph)
        records = list(ctx.records)
        writer, storage = self.writer, self.storage
        if writer is None or storage is None:
            self._records.extend(records)
            self._notify(records)
            return []
        self._write_files(decision)
        layers = self.book.pending()
        state = self._state_value(frame)
        dirty = self.cache.dirty()
        seq = self.graph.last_seq
        try:
            with writer.batch():
                writer.lock()
                for fence in self.fences:
                    fence()
                for info in layers:
                    writer.add_layer(
                        info.kind,
                        info.covers,
                        info.layer.replacement,
                        meta=info.layer.meta,
                        layer_id=info.id,
                    )
                if state != frame.saved:
                    storage.save_state(f"{self._state_key}:{decision.key or '-'}", state.decode())
                if dirty:
                    storage.save_tokens(self.counter.encoding_name, dirty)
                storage.write_records(records, self.graph.last_seq)
                if rendered is not None:
                    for hook in self.commit_hooks:
                        hook(rendered)
        except LayerError as conflict:
            raise Redo(str(conflict)) from conflict
        except GraphError as error:  # fail-open: the prompt matters more than the cache
            storage.owe(records, seq)
            self._notify(records)
            return [f"decisions not stored, kept for the next commit: {error}"]
        storage.written()
        frame.saved = state
        self.cache.clear_dirty()
        self.book.settle(info.id for info in layers)
        problems = [*self._owed, *storage.log_records(records)]
        self._owed.clear()
        self._notify(records)
        return problems

    def _write_files(self, decision: Decision) -> None:
        """Step one of a commit: the offload files, each named by its node (idempotent)."""
        failed: list[str] = []
        problems: list[str] = []
        for file in decision.ctx.files:
            try:
                write_text_once(self.folder.claim(), file.parts, file.name, file.text)
            except (OSError, OffloadError) as error:
                failed.append(file.node_id)
                problems.append(f"node {file.node_id}: {error}")
        if failed:
            raise Redo("offload files not written", tuple(failed), tuple(problems))

    def _forget(self, decision: Decision) -> None:
        """Drop what a refused commit decided: its layers, and tier state since the last
        commit (what the stored state says)."""
        frame = decision.frame
        self.book.settle([info.id for info in self.book.pending()])
        self._unhide(frame)
        frame.states = self._states(frame.saved)
        frame.scratch = {}
        frame.captured = ()

    def _unhide(self, frame: _Frame) -> None:
        """A layout whose hidden span stands under a layer that was never stored (a
        preview's, a refused commit's) starts afresh: the next render decides it again."""
        hidden = frame.layout.hidden
        known = hidden is None or hidden.layer in self.graph.state.layers
        if not known and hidden is not None and hidden.layer not in self.book.overlay:
            frame.layout = Layout()

    def _redo(self, decision: Decision, redo: Redo) -> None:
        """Before deciding again: outputs whose file could not be written stay inline."""
        for node_id in redo.failed:
            mark_failed(decision.frame.states, node_id)

    def _notify(self, records: list[CompactionRecord]) -> None:
        for record in records:
            for callback in self.callbacks:
                callback(record)

    def _save_anchor(self) -> None:
        if self.storage is not None and self.writer is not None:
            value = msgspec.json.encode(self.anchor.state()).decode()
            self.storage.save_state(f"{self._state_key}:anchor", value)

    def _log(self, record: CompactionRecord) -> None:
        """Persist a record made outside a render (a recovery)."""
        [record] = clean_records([record], self.policy, self.graph)
        if self.storage is None or self.writer is None:
            self._records.append(record)
        else:
            self.storage.save_records([record], self.graph.last_seq)
        self._notify([record])

    def records(self) -> list[CompactionRecord]:
        """This session's compaction records, oldest first (from the database if any)."""
        if self.storage is None:
            return list(self._records)
        return [*self.storage.read_records(), *self._records]

    def _prefetch(self, units: Iterable[RawUnit]) -> None:
        """Read the stored token counts of the units about to be built in one go: by key
        for a few units, all of the session's when many are (a full walk)."""
        loader = self.cache.loader
        if loader is None:
            return
        keys = []
        for unit in units:
            for message, node in unit.entries:
                if node is None:
                    continue
                if node.seq > self._stored_upto:
                    self.cache.unstored.add(node.id)
                else:
                    keys.append(f"{node.id}:{_variant(message, node)}")
        if len(keys) <= LOAD_ALL_KEYS:
            self.cache.prefetch(keys)
            return
        try:
            self.cache.update(loader(None))
        except Exception:  # fail-open: counted again (and saved) instead
            return
        self.cache.loader = None  # every stored count is known now

    def _checkpoint(self, state: _Frame, view: View, ctx: TierContext) -> None:
        """Take a new layout checkpoint when the walk or the applied layers changed."""
        layout = state.layout
        key = (layout.rebuilds, ctx.layer_key)
        if key == state.captured:
            return
        state.captured = key
        if layout.hidden is not None:
            state.checkpoint = layout.hidden
            return
        state.checkpoint = capture(
            layout, view, self.graph.state, self.policy.tool_category, self.book.overlay
        )


def _variant(message: dict[str, Any], node: Node) -> Variant:
    """How a walked node is shown before any tier acts (part of its token-count key)."""
    if node.kind == "tool":
        return "full" if node.result is not None else "pending"
    if node.kind == "function":
        return "call" if message.get("role") == "assistant" else RESULT_VARIANTS[node.status]
    return "full"
