"""``render_context`` and ``ContextEngine``: the graph, rendered under a budget.

Each render walks the graph from a head (and frame), groups the visible nodes into units,
runs the tiers that apply every turn (offload, budget reduction), re-applies earlier sticky
decisions (cleared outputs, the snip mark), then runs the cascade while the prompt does not
fit, checking integrity after every tier. Nothing stored is ever changed.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec
from sqlalchemy import select

from graph import GraphReader, Node, SQLStore, migrate

from ._emergency import emergency
from ._integrity import provider_roles, repair_tool_pairs, tool_pair_problems, unique_call_ids
from ._layout import Layout
from ._microcompact import microcompact, reapply_microcompact
from ._offload import offload
from ._policy import Policy
from ._records import (
    TOKEN_CACHE,
    CompactionRecord,
    append_jsonl,
    insert_records,
    records_path,
)
from ._reduce import budget_reduction
from ._snip import snip, snipped_prefix
from ._tier import Action, Decisions, Tier, TierContext
from ._tokens import TokenCache, TokenCounter, UsageAnchor
from ._view import Item, RawUnit, Unit, View

TIERS: dict[str, Tier] = {
    "offload": offload,
    "budget_reduction": budget_reduction,
    "microcompact": microcompact,
    "snip": snip,
    "emergency": emergency,
}
"""The cascade tiers by name; a policy's ``cascade`` lists them in order."""


class Rendered(msgspec.Struct, frozen=True):
    """One render: provider-ready messages and what it took to get there."""

    messages: list[dict[str, Any]]
    tokens: int
    budget: int
    actions: list[Action]
    records: list[CompactionRecord]
    context_management: dict[str, Any] | None = None

    @property
    def fits(self) -> bool:
        return self.tokens <= self.budget


_MIGRATED: set[str] = set()


class ContextEngine:
    """Renders a graph every turn, keeping the decisions that make renders byte-stable.

    >>> from graph import ConversationGraph
    >>> g = ConversationGraph.memory()
    >>> _ = g.append({"role": "system", "content": "You are terse."})
    >>> _ = g.append({"role": "user", "content": "hi"})
    >>> engine = ContextEngine(g, budget=1_000, policy=Policy(state_dir=".op-doctest"))
    >>> out = engine.render()
    >>> [m["role"] for m in out.messages], out.tokens <= 1_000
    (['system', 'user'], True)
    """

    def __init__(
        self,
        graph: GraphReader,
        policy: Policy | None = None,
        summarizer: Any = None,
        budget: int | None = None,
        *,
        tools: Sequence[dict[str, Any]] = (),
        clock: Callable[[], datetime] | None = None,
        on_record: Callable[[CompactionRecord], None] | None = None,
    ) -> None:
        self.graph = graph
        self.policy = policy or Policy()
        self.summarizer = summarizer
        """Used by the summarizing tiers (collapse, auto-compact) when they are in the cascade."""
        self.budget = budget if budget is not None else self.policy.budget
        self.tools = list(tools)
        self.clock = clock or (lambda: datetime.now(UTC))
        self.callbacks: list[Callable[[CompactionRecord], None]] = []
        if on_record is not None:
            self.callbacks.append(on_record)
        self.counter = TokenCounter(self.policy.model)
        self.cache = TokenCache()
        self.anchor = UsageAnchor()
        self.last: Rendered | None = None
        self._decisions: dict[str | None, Decisions] = {}
        self._layouts: dict[str | None, Layout] = {}
        self._memo: dict[tuple[str, str], Item] = {}
        self._tool_tokens = self.counter.count_tools(self.tools)
        self._load_cache()

    # -- persistence ------------------------------------------------------------------
    def _sql(self) -> SQLStore | None:
        store = getattr(self.graph, "store", None)
        if isinstance(store, SQLStore):
            if store.url not in _MIGRATED:
                migrate(store.engine)
                _MIGRATED.add(store.url)
            return store
        return None

    def _load_cache(self) -> None:
        store = self._sql()
        if store is None:
            return
        query = select(TOKEN_CACHE.c.key, TOKEN_CACHE.c.tokens).where(
            TOKEN_CACHE.c.session == self.graph.session,
            TOKEN_CACHE.c.encoding == self.counter.encoding_name,
        )
        with store.engine.connect() as connection:
            self.cache.update({row[0]: int(row[1]) for row in connection.execute(query)})
        self.cache.clear_dirty()

    def _persist(self, records: list[CompactionRecord]) -> None:
        if records:
            append_jsonl(records_path(self.policy.state_dir, self.graph.session), records)
        store = self._sql()
        if store is not None:
            dirty = self.cache.dirty()
            if dirty or records:
                with store.engine.begin() as connection:
                    insert_records(connection, records, self.graph.last_seq)
                    if dirty:
                        connection.execute(
                            TOKEN_CACHE.insert(),
                            [
                                {
                                    "session": self.graph.session,
                                    "encoding": self.counter.encoding_name,
                                    "key": key,
                                    "tokens": tokens,
                                }
                                for key, tokens in dirty.items()
                            ],
                        )
        self.cache.clear_dirty()
        for record in records:
            for callback in self.callbacks:
                callback(record)

    def anchor_usage(self, input_tokens: int) -> None:
        """Correct later estimates with the provider's reported input tokens for the last render."""
        if self.last is not None and input_tokens > 0:
            self.anchor.anchor_usage(self.last.tokens, input_tokens)

    # -- rendering --------------------------------------------------------------------
    def _build(self, unit: RawUnit, position: int, ctx: TierContext) -> Unit:
        items = tuple(self._item(message, node, ctx) for message, node in unit.entries)
        ids = tuple(dict.fromkeys(node.id for _, node in unit.entries if node is not None))
        return Unit(items, unit.kind, position, unit.pinned, unit.running, ids)

    def _item(self, message: dict[str, Any], node: Node | None, ctx: TierContext) -> Item:
        if node is None:
            return ctx.item(message, None, "full")
        tool_name = None
        if node.kind == "tool":
            tool_name = node.payload.name
            variant = "full" if node.result is not None else "pending"
        elif node.kind == "function":
            variant = "call" if message.get("role") == "assistant" else f"result:{node.status}"
        else:
            variant = "full"
        return ctx.item(message, node.id, variant, tool_name)

    def _cap_callers(self, units: list[Unit], frame: str | None) -> list[Unit]:
        limit = self.policy.callers
        if frame is None or limit is None:
            return units
        callers = [i for i, u in enumerate(units) if not u.running and not u.pinned]
        first_running = next((i for i, u in enumerate(units) if u.running), len(units))
        callers = [i for i in callers if i < first_running]
        drop = set(callers[: max(0, len(callers) - limit)])
        return [u for i, u in enumerate(units) if i not in drop]

    def render(self, head: str | None = None, frame: str | None = None) -> Rendered:
        """The prompt for the next LLM call from ``head`` (inside ``frame`` if given)."""
        started = time.perf_counter()
        decisions = self._decisions.setdefault(frame, Decisions())
        budget = max(1, int(self.budget / self.anchor.ratio))
        ctx = TierContext(
            self.graph, self.policy, budget, self.counter, self.cache, decisions, self.clock()
        )
        ctx.memo = self._memo
        if head is None and frame is None:
            head = self.graph.default_head()
        layout = self._layouts.setdefault(frame, Layout())
        layout.update(self.graph.state, head, frame)
        walked = layout.units(lambda raw, at: self._build(raw, at, ctx))
        units = self._cap_callers(walked, frame)
        if decisions.snip_boundary and not self._same_branch(units, decisions):
            decisions = self._decisions[frame] = Decisions()
            ctx.decisions = decisions
        ctx.compactable, ctx.kept_tools = layout.tools(walked, self.policy.tool_category)
        view = self._snipped(View(tuple(units), self._tool_tokens), layout, ctx)
        for name in self.policy.cascade:
            if name in self.policy.always:
                view = self._run(name, TIERS[name], view, ctx)
        view = reapply_microcompact(view, ctx)
        for name in self.policy.cascade:
            if name in self.policy.always:
                continue
            if view.tokens <= budget:
                break
            view = self._run(name, TIERS[name], view, ctx)
        if view.units and decisions.snip_boundary:
            decisions.snip_anchor = self._anchor_id(units, decisions.snip_boundary)
        messages, tokens = self._finish(view, ctx)
        if tokens > budget >= view.tokens and "emergency" in self.policy.cascade:
            # Integrity added a turn (a provider's role rules): make room for it too.
            ctx.budget = budget - (tokens - view.tokens)
            view = self._run("emergency", emergency, view, ctx)
            ctx.budget = budget
            messages, tokens = self._finish(view, ctx)
        rendered = Rendered(
            messages=messages,
            tokens=tokens,
            budget=self.budget,
            actions=ctx.actions,
            records=ctx.records,
            context_management={"edits": ctx.edits} if ctx.edits else None,
        )
        self._persist(ctx.records)
        self.last = rendered
        self.render_ms = (time.perf_counter() - started) * 1000
        return rendered

    def _run(self, name: str, tier: Tier, view: View, ctx: TierContext) -> View:
        try:
            after = tier(view, ctx)
        except Exception as error:  # fail-open: a broken tier must not cost the turn
            ctx.act(name, "failed; render continues without it", view, view, error=repr(error))
            ctx.record(name, view, view, started=time.perf_counter(), error=repr(error))
            return view
        problems = tool_pair_problems(after.messages, unique_ids=False)
        if problems:
            ctx.act(
                name, "broke tool pairing; its result was discarded", view, view, error=problems[0]
            )
            return view
        return after

    def _snipped(self, view: View, layout: Layout, ctx: TierContext) -> View:
        """Apply the sticky low-water mark; its prefix is reused while nothing before it
        changed, so a long session's render costs what its kept part costs."""
        boundary = ctx.decisions.snip_boundary
        if boundary <= 0 or not view.units:
            return view
        units = list(view.units)
        boundary = min(boundary, units[-1].position)
        split = (
            bisect.bisect_left([u.position for u in units], boundary)
            if self.policy.callers is not None
            else boundary
        )
        cached = layout.prefix
        if cached is None or cached[0] != boundary or self.policy.callers is not None:
            prefix, count = snipped_prefix(units[:split], ctx)
            layout.prefix = cached = (boundary, prefix, count)
        after = view.replace([*cached[1], *units[split:]])
        if cached[2]:
            ctx.act("snip", f"kept {cached[2]} earlier round(s) out", view, after)
        return after

    @staticmethod
    def _anchor_id(units: list[Unit], boundary: int) -> str | None:
        index = boundary - 1
        if 0 <= index < len(units) and units[index].position == index:
            return units[index].node_ids[0] if units[index].node_ids else None
        for unit in units:
            if unit.position == index and unit.node_ids:
                return unit.node_ids[0]
        return None

    def _same_branch(self, units: list[Unit], decisions: Decisions) -> bool:
        return decisions.snip_anchor is None or (
            self._anchor_id(units, decisions.snip_boundary) == decisions.snip_anchor
        )

    def _finish(self, view: View, ctx: TierContext) -> tuple[list[dict[str, Any]], int]:
        messages = view.messages
        tokens = view.tokens
        fixed, notes = repair_tool_pairs(messages)
        fixed, renamed = unique_call_ids(fixed)
        notes += renamed
        if self.policy.merge_roles:
            fixed, role_notes = provider_roles(fixed)
            notes += role_notes
        if notes:
            ctx.act("integrity", "; ".join(dict.fromkeys(notes)), view, view)
            # Keep the view's per-item counts (an output a context edit clears is counted
            # cleared); add only what the repairs changed.
            kept = {id(m) for m in messages} & {id(m) for m in fixed}
            added = self.counter.count_messages(m for m in fixed if id(m) not in kept)
            removed = sum(
                item.tokens
                for unit in view.units
                for item in unit.items
                if id(item.message) not in kept
            )
            tokens += added - removed
        return fixed, tokens


def render_context(
    graph: GraphReader,
    *,
    budget: int | None = None,
    policy: Policy | None = None,
    head: str | None = None,
    frame: str | None = None,
    summarizer: Any = None,
) -> Rendered:
    """Render once, with no memory of earlier renders (see ``ContextEngine`` for a loop).

    >>> from graph import ConversationGraph
    >>> g = ConversationGraph.memory()
    >>> _ = g.append({"role": "user", "content": "hello"})
    >>> render_context(g, budget=500, policy=Policy(state_dir=".op-doctest")).messages
    [{'role': 'user', 'content': 'hello'}]
    """
    engine = ContextEngine(graph, policy, summarizer, budget)
    return engine.render(head=head, frame=frame)
