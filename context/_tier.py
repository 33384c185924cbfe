"""What every tier shares: its one signature, the per-render context, actions and records.

A tier is a plain function ``tier(view, ctx) -> view``. It reads thresholds from
``ctx.policy``, reports what it did with ``ctx.act`` and, when it makes a *new* decision
(not re-applying an earlier one), a :class:`~context.CompactionRecord` with ``ctx.record``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from graph import GraphReader, new_id

from ._policy import Policy
from ._records import CompactionRecord
from ._tokens import TokenCache, TokenCounter
from ._view import Item, View


class Action(msgspec.Struct, frozen=True):
    """What one tier did in one render (in memory, cheap)."""

    tier: str
    what: str
    tokens_before: int
    tokens_after: int
    nodes: tuple[str, ...] = ()
    error: str | None = None

    @property
    def saved(self) -> int:
        return self.tokens_before - self.tokens_after


@dataclass
class Decisions:
    """Compaction decisions an engine keeps between renders, so repeats are byte-stable."""

    offloaded: dict[str, str] = field(default_factory=dict)
    offload_failed: set[str] = field(default_factory=set)
    cleared_upto: int = 0
    """Microcompact cleared compactable outputs before this ordinal of the tool list."""
    trigger_count: int = 0
    snip_boundary: int = 0
    """Snip dropped the non-exempt units before this position (the low-water mark)."""
    snip_anchor: str | None = None
    """The first node of the unit at the boundary, to notice a changed branch."""
    emergencies: int = 0


@dataclass
class TierContext:
    """Everything a tier may read or report during one render."""

    graph: GraphReader
    policy: Policy
    budget: int
    counter: TokenCounter
    cache: TokenCache
    decisions: Decisions
    now: datetime
    actions: list[Action] = field(default_factory=list)
    records: list[CompactionRecord] = field(default_factory=list)
    edits: list[dict[str, Any]] = field(default_factory=list)
    compactable: list[str] | None = None
    """Compactable tool nodes of the whole walk, oldest first, before any snip (set by
    the per-turn microcompact pass; ``cleared_upto`` is an ordinal into this list)."""
    kept_tools: list[str] = field(default_factory=list)
    """Names of the walk's non-compactable tools (a context edit excludes them)."""
    memo: dict[tuple[str, str], Item] = field(default_factory=dict)
    """Items by (node id, variant): a node's rendering in a variant never changes."""
    started: float = field(default_factory=time.perf_counter)

    @property
    def session(self) -> str:
        return self.graph.session

    def item(
        self,
        message: dict[str, Any],
        node_id: str | None,
        variant: str,
        tool_name: str | None = None,
    ) -> Item:
        """An item whose token count is cached under the node id and variant."""
        if node_id is None:
            return Item(message, self.counter.count_message(message), None, tool_name, variant)
        key = (node_id, variant)
        item = self.memo.get(key)
        if item is None:
            tokens = self.counter.count_cached(f"{node_id}:{variant}", message, self.cache)
            item = self.memo[key] = Item(message, tokens, node_id, tool_name, variant)
        return item

    def memoized(self, node_id: str | None, variant: str) -> Item | None:
        """The item made earlier for this node and variant, if any (skips the work)."""
        return None if node_id is None else self.memo.get((node_id, variant))

    def act(
        self,
        tier: str,
        what: str,
        before: View,
        after: View,
        nodes: tuple[str, ...] = (),
        error: str | None = None,
    ) -> None:
        self.actions.append(Action(tier, what, before.tokens, after.tokens, nodes, error))

    def record(
        self,
        tier: str,
        before: View,
        after: View,
        *,
        started: float,
        offloaded: list[dict[str, Any]] | None = None,
        summarized: int = 0,
        preserved: int = 0,
        summary: str | None = None,
        error: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> CompactionRecord:
        tokens_before, tokens_after = before.tokens, after.tokens
        record = CompactionRecord(
            id=new_id(),
            session=self.session,
            timestamp=self.now.isoformat(),
            tier=tier,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            messages_before=len(before.messages),
            messages_after=len(after.messages),
            offloaded=offloaded or [],
            summarized=summarized,
            preserved=preserved,
            summary=summary,
            ratio=round(tokens_after / tokens_before, 4) if tokens_before else 1.0,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            error=error,
            details=details or {},
        )
        self.records.append(record)
        return record


Tier = Callable[[View, TierContext], View]
"""The one signature every cascade tier has."""
