"""What an engine keeps between renders and between processes: per-frame state, token
counts, records and the layout checkpoint (the persistence half of ``ContextEngine``).

Tier state is saved per configuration epoch and frame; the main frame's state also
carries the layout checkpoint (``_checkpoint``), so a fresh engine builds only the units
that a persisted layer does not hide. Token counts are read by key for the units a render
builds, never all of a long session's at once unless a full walk needs them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from graph import GraphReader, Node

from ._checkpoint import Checkpoint, capture
from ._layout import Layout
from ._records import CompactionRecord
from ._redaction import clean_records
from ._storage import ContextStorage
from ._tier import Tier, TierContext, TierState
from ._tokens import TokenCache, TokenCounter, UsageAnchor
from ._view import RawUnit, View

if TYPE_CHECKING:
    from ._policy import Policy

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

    def _load(self) -> None:
        if self.storage is None:
            return
        storage, encoding = self.storage, self.counter.encoding_name
        self.cache.loader = lambda keys: storage.load_tokens(encoding, keys)
        saved = self.storage.load_state(f"{self._state_key}:anchor")
        if saved:
            ratio, reports, *rest = msgspec.json.decode(saved)
            self.anchor.restore(float(ratio), int(reports), *rest)

    def _frame(self, frame: str | None) -> _Frame:
        found = self._frames.get(frame)
        if found is not None:
            return found
        found = self._frames[frame] = _Frame()
        if self.storage is not None:
            saved = self.storage.load_state(f"{self._state_key}:{frame or '-'}")
            if saved:
                raw = msgspec.json.decode(saved)
                for tier in self.tiers:
                    if tier.name in raw:
                        found.states[tier.name] = msgspec.convert(raw[tier.name], tier.state)
                if frame is None and LAYOUT in raw:
                    try:
                        found.restore = msgspec.convert(raw[LAYOUT], Checkpoint)
                    except msgspec.ValidationError:  # an older shape: walk in full
                        found.restore = None
                    found.checkpoint = found.restore
                found.saved = saved.encode()
        return found

    def _persist(self, ctx: TierContext, frame: _Frame, key: str | None) -> list[str]:
        problems: list[str] = []
        ctx.records[:] = clean_records(ctx.records, self.policy, self.graph)
        if self.storage is None:
            self._records.extend(ctx.records)
        else:
            problems += self.storage.save_records(ctx.records, self.graph.last_seq)
            try:
                dirty = self.cache.dirty()
                if dirty:
                    self.storage.save_tokens(self.counter.encoding_name, dirty)
                    self.cache.clear_dirty()
                values = {name: msgspec.to_builtins(value) for name, value in frame.states.items()}
                if frame.checkpoint is not None:
                    values[LAYOUT] = msgspec.to_builtins(frame.checkpoint)
                state = msgspec.json.encode(dict(sorted(values.items())))
                if state != frame.saved:
                    self.storage.save_state(f"{self._state_key}:{key or '-'}", state.decode())
                    frame.saved = state
            except Exception as error:  # fail-open: the prompt matters more than the cache
                problems.append(f"tier state or token counts not saved: {error}")
        for record in ctx.records:
            for callback in self.callbacks:
                callback(record)
        return problems

    def _save_anchor(self) -> None:
        if self.storage is not None:
            value = msgspec.json.encode(self.anchor.state()).decode()
            self.storage.save_state(f"{self._state_key}:anchor", value)

    def _log(self, record: CompactionRecord) -> None:
        """Persist a record made outside a render (a rollback, a recovery)."""
        [record] = clean_records([record], self.policy, self.graph)
        if self.storage is None:
            self._records.append(record)
        else:
            self.storage.save_records([record], self.graph.last_seq)
        for callback in self.callbacks:
            callback(record)

    def records(self) -> list[CompactionRecord]:
        """This session's compaction records, oldest first (from the database if any)."""
        if self.storage is None:
            return list(self._records)
        return self.storage.read_records()

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
        state.checkpoint = capture(layout, view, self.graph.state, self.policy.tool_category)


def _variant(message: dict[str, Any], node: Node) -> str:
    """How a walked node is shown before any tier acts (part of its token-count key)."""
    if node.kind == "tool":
        return "full" if node.result is not None else "pending"
    if node.kind == "function":
        return "call" if message.get("role") == "assistant" else f"result:{node.status}"
    return "full"
