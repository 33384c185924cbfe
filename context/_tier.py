"""What every tier shares: its shape, its own sticky state, the per-render context.

A tier is one module exporting a :class:`Tier`: a name, the class of its sticky state, and
up to two plain functions with the one signature ``fn(view, ctx) -> view``:

- ``apply`` runs on every render and re-applies what the tier decided before (cleared
  outputs, the snip mark), in cascade order, so consecutive prompts stay byte-stable;
- ``compact`` runs when the prompt is over the tier's trigger (a share of the budget, from
  the ``Policy``) and may make a new decision, recording it with ``ctx.record``.

A tier reads and writes only its own state (``ctx.state(MyState)``) and writes nothing
else: it decides. New layers go to ``ctx.layers`` (pending), records to ``ctx.record``,
files to ``ctx.files``; the engine commits them all after the render (``_commit``), or
drops them for a preview, so a restarted process renders the same prompt.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import msgspec

from graph import GraphReader, new_id

from ._policy import Policy
from ._records import CompactionRecord
from ._tokens import TokenCache, TokenCounter
from ._view import Item, Unit, View

if TYPE_CHECKING:
    from ._layers import LayerBook
    from ._prefetch import Prefetcher
    from ._summary import Summarizer


class TierState(msgspec.Struct):
    """Base of a tier's sticky state: plain, mutable, JSON-serializable."""


class NoState(TierState):
    """For tiers that keep nothing between renders."""


S = TypeVar("S", bound=TierState)

TierFn = Callable[[View, "TierContext"], View]
"""The one signature of a tier's functions."""


class Tier(NamedTuple):
    """One cascade tier: its name, state class and its two functions (either may be None).

    ``early`` marks a tier whose ``apply`` only drops whole units, whatever their items
    hold: it runs before every other tier's per-item work, which it spares.
    """

    name: str
    apply: TierFn | None = None
    compact: TierFn | None = None
    state: type[TierState] = NoState
    early: bool = False


class OffloadFile(NamedTuple):
    """A file a render decided on: ``state_dir/parts…/name`` holding ``text`` (named by
    the node whose output it is, so writing it again changes nothing)."""

    node_id: str
    parts: tuple[str, ...]
    name: str
    text: str


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
class TierContext:
    """Everything a tier may read or report during one render."""

    graph: GraphReader
    policy: Policy
    budget: int
    counter: TokenCounter
    cache: TokenCache
    now: datetime
    states: dict[str, TierState] = field(default_factory=dict)
    """This frame's sticky state, by tier name."""
    scratch: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per-tier caches kept between renders of this frame (never persisted)."""
    tier: str = ""
    """The tier running now (set by the engine)."""
    frame: str | None = None
    summarizer: Summarizer | None = None
    prefetch: Prefetcher | None = None
    """Summaries computed ahead of need (an LLM summarizer and ``proactive_share`` set)."""
    layers: LayerBook | None = None
    units: list[Unit] = field(default_factory=list)
    """The walk's units before any tier (positions index into it)."""
    first_changed: int = 0
    """Lowest unit position the layout rebuilt for this render."""
    walks: int = 0
    """Full walks the layout has made (a fork, another frame): caches of units reset then."""
    layer_key: tuple[str, ...] = ()
    """The layers applied to this render's view (caches keyed on the view use it)."""
    actions: list[Action] = field(default_factory=list)
    records: list[CompactionRecord] = field(default_factory=list)
    edits: list[dict[str, Any]] = field(default_factory=list)
    files: list[OffloadFile] = field(default_factory=list)
    """Files this render decided to write (offloaded outputs): the commit writes them
    before anything else, a preview never does. Tiers never write while they decide."""
    compactable: list[str] | None = None
    """Compactable tool nodes of the whole walk, oldest first, before any snip (set by the
    engine; microcompact's ``cleared_upto`` is an ordinal into this list)."""
    kept_tools: list[str] = field(default_factory=list)
    """Names of the walk's non-compactable tools (a context edit excludes them)."""
    summaries: dict[tuple[object, ...], Any] = field(default_factory=dict)
    """Summaries this engine was given, by request: the same question is asked once."""
    memo: dict[tuple[str, str], Item] = field(default_factory=dict)
    """Items by (node id, variant): a node's rendering in a variant never changes."""
    started: float = field(default_factory=time.perf_counter)
    nominal_budget: int = 0
    """The engine's budget before the usage anchor and overflow recovery adjust it: what
    sticky per-output decisions (offload) are measured against, so they never flip."""

    @property
    def session(self) -> str:
        return self.graph.session

    @property
    def target(self) -> int:
        """Where a triggered cascade shrinks to (the policy's low-water mark)."""
        return self.policy.target(self.budget)

    def state(self, kind: type[S]) -> S:
        """The running tier's own sticky state (created on first use)."""
        value = self.states.get(self.tier)
        if not isinstance(value, kind):
            value = self.states[self.tier] = kind()
        return value

    def cache_of(self) -> dict[str, Any]:
        """The running tier's scratch space for this frame."""
        return self.scratch.setdefault(self.tier, {})

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
        anchors: dict[str, Any] | None = None,
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
            messages_before=before.message_count,
            messages_after=after.message_count,
            offloaded=offloaded or [],
            summarized=summarized,
            preserved=preserved,
            summary=summary,
            anchors=anchors,
            ratio=round(tokens_after / tokens_before, 4) if tokens_before else 1.0,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            error=error,
            details=details or {},
        )
        self.records.append(record)
        return record
