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

import contextvars
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

import msgspec

from graph import ChatMessage, GraphReader, new_id

from .._budget._policy import Policy
from .._budget._readback import node_ref
from .._budget._schedule import Plan, plan_for
from .._budget._tokens import TokenCache, TokenCounter
from .._store._folder import StateFolder
from .._store._records import CompactionRecord, wall_clock
from .._summaries._prefetch import Prefetcher
from .._summaries._summary import Summarizer
from .._view import Item, Unit, Variant, View
from ._book import LayerBook


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


@dataclass(frozen=True)
class RenderInputs:
    """What one render is computed from; fixed while it runs."""

    graph: GraphReader
    policy: Policy
    now: datetime
    frame: str | None = None
    nominal_budget: int = 0
    """The engine's budget before the usage anchor and overflow recovery adjust it: what
    sticky per-output decisions (offload) are measured against, so they never flip."""
    folder: StateFolder | None = None
    """The database's state folder, where the commit writes offloaded outputs."""


@dataclass(frozen=True)
class TierServices:
    """What tiers call on: shared by an engine's renders, never a decision."""

    counter: TokenCounter
    cache: TokenCache
    summarizer: Summarizer | None = None
    prefetch: Prefetcher | None = None
    """Summaries computed ahead of need (an LLM summarizer and ``proactive_share`` set)."""
    layers: LayerBook | None = None
    memo: dict[tuple[str, str], Item] = field(default_factory=dict)
    """Items by (node id, variant): a node's rendering in a variant never changes."""
    summaries: dict[tuple[object, ...], Any] = field(default_factory=dict)
    """Summaries this engine was given, by request: the same question is asked once."""


@dataclass
class TierDecisions:
    """What a render decided besides its layers (which wait in ``TierServices.layers``) and
    tier state: the commit writes them, a preview drops them."""

    actions: list[Action] = field(default_factory=list)
    records: list[CompactionRecord] = field(default_factory=list)
    edits: list[dict[str, Any]] = field(default_factory=list)
    files: list[OffloadFile] = field(default_factory=list)
    """Files to write (offloaded outputs): the commit writes them before anything else.
    Tiers never write while they decide."""
    render: str = field(default_factory=lambda: render_id())
    """The render's id: its records, sources and receipt carry it."""
    at: str = field(default_factory=wall_clock)
    """When it was decided (wall clock): its records' timestamp."""
    summary: str = ""
    """How the render got its summaries (``_awaiting``: the most telling)."""


def render_id() -> str:
    """A new render's id, made outside any ``seeded_ids`` scope: a replay's seeded ids are
    the ones its prompts show (layers), and a render id must not move them."""
    return contextvars.Context().run(new_id)


@dataclass
class TierContext:
    """Everything a tier may read or report during one render: its frozen ``inputs``, the
    ``services`` it calls on, the ``decisions`` it reports, and the walk it works on. The
    fields of the three parts read as attributes of the context too (``ctx.policy``)."""

    inputs: RenderInputs
    services: TierServices
    budget: int
    """The budget this pass shrinks to (the engine lowers it for an integrity turn)."""
    decisions: TierDecisions = field(default_factory=TierDecisions)
    states: dict[str, TierState] = field(default_factory=dict)
    """This frame's sticky state, by tier name."""
    scratch: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per-tier caches kept between renders of this frame (never persisted)."""
    tier: str = ""
    """The tier running now (set by the engine)."""
    incremental: bool = True
    """Whether tiers may skip units they are known to leave as they are (set by the
    engine: ``ContextEngine.incremental``; False visits every unit, the reference)."""
    units: list[Unit] = field(default_factory=list)
    """The walk's units before any tier (positions index into it)."""
    first_changed: int = 0
    """Lowest unit position the layout rebuilt for this render."""
    walks: int = 0
    """Full walks the layout has made (a fork, another frame): caches of units reset then."""
    layer_key: tuple[str, ...] = ()
    """The layers applied to this render's view (caches keyed on the view use it)."""
    compactable: list[str] | None = None
    """Compactable tool nodes of the whole walk, oldest first, before any snip (set by the
    engine; microcompact's ``cleared_upto`` is an ordinal into this list)."""
    kept_tools: list[str] = field(default_factory=list)
    """Names of the walk's non-compactable tools (a context edit excludes them)."""
    started: float = field(default_factory=time.perf_counter)
    without_summary: bool = False
    """A summary this render needed is not ready (``summary_wait = "never"``): the tiers
    after it act only to fit the budget, not down to the low-water mark."""
    _plan: tuple[list[Unit], tuple[int, int], Plan] | None = field(default=None, repr=False)

    # -- the parts' fields, as tiers read them ------------------------------------------
    @property
    def graph(self) -> GraphReader:
        return self.inputs.graph

    @property
    def policy(self) -> Policy:
        return self.inputs.policy

    def handle(self, node_id: str) -> str:
        """How the prompt names a node (``n<seq>``; see ``node_ref``)."""
        return node_ref(self.graph, node_id)

    @property
    def now(self) -> datetime:
        return self.inputs.now

    @property
    def frame(self) -> str | None:
        return self.inputs.frame

    @property
    def nominal_budget(self) -> int:
        return self.inputs.nominal_budget

    @property
    def folder(self) -> StateFolder | None:
        return self.inputs.folder

    @property
    def counter(self) -> TokenCounter:
        return self.services.counter

    @property
    def cache(self) -> TokenCache:
        return self.services.cache

    @property
    def summarizer(self) -> Summarizer | None:
        return self.services.summarizer

    @property
    def prefetch(self) -> Prefetcher | None:
        return self.services.prefetch

    @property
    def layers(self) -> LayerBook | None:
        return self.services.layers

    @property
    def memo(self) -> dict[tuple[str, str], Item]:
        return self.services.memo

    @property
    def summaries(self) -> dict[tuple[object, ...], Any]:
        return self.services.summaries

    @property
    def actions(self) -> list[Action]:
        return self.decisions.actions

    @property
    def records(self) -> list[CompactionRecord]:
        return self.decisions.records

    @property
    def edits(self) -> list[dict[str, Any]]:
        return self.decisions.edits

    @property
    def files(self) -> list[OffloadFile]:
        return self.decisions.files

    @property
    def session(self) -> str:
        return self.graph.session

    @property
    def target(self) -> int:
        """Where a triggered cascade shrinks to (the policy's low-water mark, or the cache
        schedule's target); the budget once the render went without a summary."""
        if self.without_summary:
            return self.budget
        if self.policy.schedule == "cache":
            return self.plan().target
        return self.policy.target(self.budget)

    def threshold(self, tier: str) -> float:
        """Prompt tokens above which ``tier`` acts in this render: the policy's, or for
        auto-compact under the cache schedule its trigger, if lower."""
        threshold = self.policy.threshold(tier, self.budget)
        if tier == "compact" and self.policy.schedule == "cache":
            return min(threshold, self.plan().trigger)
        return threshold

    def plan(self) -> Plan:
        """The cache schedule's plan for this render's walk and budget (computed once)."""
        key = (self.budget, len(self.units))
        cached = self._plan
        if cached is None or cached[0] is not self.units or cached[1] != key:
            cached = self._plan = (self.units, key, plan_for(self.policy, self.budget, self.units))
        return cached[2]

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
        message: ChatMessage,
        node_id: str | None,
        variant: Variant,
        tool_name: str | None = None,
        *,
        part: int | None = None,
    ) -> Item:
        """An item whose token count is cached under the node id and variant (and ``part``:
        which of a layer's messages it is)."""
        if node_id is None:
            return Item(message, self.counter.count_message(message), None, tool_name, variant)
        key = (node_id, variant if part is None else f"{variant}:{part}")
        item = self.memo.get(key)
        if item is None:
            tokens = self.counter.count_cached(f"{node_id}:{key[1]}", message, self.cache)
            item = self.memo[key] = Item(message, tokens, node_id, tool_name, variant)
        return item

    def memoized(self, node_id: str | None, variant: Variant) -> Item | None:
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
            timestamp=self.decisions.at,
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
            render=self.decisions.render,
            frame=self.frame,
            clock=self.now.isoformat(),
        )
        self.records.append(record)
        return record


def restored_since(ctx: TierContext, seen: int) -> tuple[int, set[str]]:
    """How many layers are rolled back now, and the nodes covered by those rolled back
    after the first ``seen`` (none while ``seen`` is -1: not counted yet). A sticky tier
    keeps ``seen`` in its state so it gives back, once, what each rollback restored."""
    undone = ctx.graph.layers(active=False)
    if seen < 0 or len(undone) <= seen:
        return len(undone), set()
    newest = sorted(undone, key=lambda info: info.rolled_back or 0)[seen:]
    return len(undone), {node for info in newest for node in info.covers}
