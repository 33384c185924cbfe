"""``render_context`` and ``ContextEngine``: the graph, rendered under a budget.

Each render walks the graph from a head (and frame), groups the visible nodes into units,
shows active layers in place of what they cover, and hands that view to the cascade
(``_cascade``: the tier list, integrity checked after every tier). A render computes,
then commits what its tiers decided. Nothing stored is ever changed; what tiers decided is
persisted, so a restarted process renders the same prompt.
"""

from __future__ import annotations

import copy
import functools
import os
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from graph import ConversationGraph, GraphReader, Node

from ._backlog_chain import chain_backlog
from ._backlog_walk import compact_backlog
from ._cascade import Cascade
from ._commit import Decision, Redo, SessionWriter
from ._errors import BudgetFloorWarning, CommitConflict, PolicyError
from ._folder import StateFolder, state_folder
from ._layers import LayerBook, project
from ._layout import Layout
from ._manual import LayerOperations
from ._names import as_tier
from ._persistence import EngineStorage, _Frame, _variant
from ._policy import MAX_TOKENS, Policy
from ._prefetch import Prefetcher
from ._records import CompactionRecord
from ._recover import Recovery
from ._registry import resolve_tiers
from ._rendered import Rendered
from ._storage import ContextStorage
from ._summary import Summarizer, default_summarizer
from ._tier import (
    RenderInputs,
    Tier,
    TierContext,
    TierDecisions,
    TierServices,
    TierState,
)
from ._tokens import TokenCache, TokenCounter, UsageAnchor
from ._view import Item, RawUnit, Unit, View

EXACT_COUNT_CHARS = 200_000
"""Longer texts are counted by an upper bound, not tokenized (see ``TokenCounter``)."""


class ContextEngine(Cascade, EngineStorage, LayerOperations, Recovery):
    """Renders a graph every turn, keeping the decisions that make renders byte-stable.

    >>> from graph import ConversationGraph
    >>> g = ConversationGraph.memory()
    >>> _ = g.append({"role": "system", "content": "You are terse."})
    >>> _ = g.append({"role": "user", "content": "hi"})
    >>> engine = ContextEngine(g, budget=1_000)
    >>> out = engine.render()
    >>> [m["role"] for m in out.messages], out.tokens <= 1_000
    (['system', 'user'], True)
    """

    def __init__(
        self,
        graph: GraphReader,
        policy: Policy | None = None,
        summarizer: Summarizer | None = None,
        budget: int | None = None,
        *,
        tools: Sequence[dict[str, Any]] = (),
        clock: Callable[[], datetime] | None = None,
        on_record: Callable[[CompactionRecord], None] | None = None,
        tiers: Sequence[Tier | str] | None = None,
        state_dir: StateFolder | str | os.PathLike[str] | None = None,
        state_key: str | None = None,
        read_only: bool = False,
    ) -> None:
        self.graph = graph
        self.policy = policy or Policy()
        self.summarizer = summarizer if summarizer is not None else default_summarizer()
        proactive = getattr(self.summarizer, "proactive", False)
        self.prefetch = (
            Prefetcher(self.summarizer)
            if proactive and self.policy.proactive_share is not None
            else None
        )
        """Used by the summarizing tiers (collapse, compact); heuristic unless given."""
        self.budget = _check_budget(budget if budget is not None else self.policy.budget)
        self.tiers = resolve_tiers(tiers if tiers is not None else self.policy.cascade)
        self.tools = list(tools)
        self.clock = clock or (lambda: datetime.now(UTC))
        self.callbacks: list[Callable[[CompactionRecord], None]] = []
        if on_record is not None:
            self.callbacks.append(on_record)
        self.counter = TokenCounter(self.policy.model, exact_limit=EXACT_COUNT_CHARS, lazy=True)
        self.cache = TokenCache()
        self.anchor = UsageAnchor()
        self.last: Rendered | None = None
        self.render_ms = 0.0
        self.writer: SessionWriter | None = (
            graph if isinstance(graph, ConversationGraph) and not read_only else None
        )
        """What the engine writes through; None for a reader (a past seq, ``read_only``),
        whose decisions stay in memory and which never writes or migrates anything."""
        live = graph if isinstance(graph, ConversationGraph) else None
        self.book = LayerBook(
            graph,
            refresh=None if live is None else live.refresh,
            session_of=None if live is None else live.store.session_of,
        )
        self.lock: threading.RLock = live._lock if live is not None else threading.RLock()
        """Held by every render and layer operation: the graph's own lock when it has one,
        so a render never sees a half-applied append from another thread."""
        self.fences: list[Callable[[], None]] = []
        """Called inside every commit's transaction, under the session's lock: one that
        raises refuses the commit (a writer whose lease was taken is fenced off)."""
        self.commit_hooks: list[Callable[[Rendered], None]] = []
        self.rendering: tuple[str | None, str | None] = (None, None)
        """The head and frame of the render being committed (what a hook's receipt names)."""
        """Called inside a render's transaction with what it rendered: the render
        receipt is written here, atomically with the decisions it was rendered under."""
        self.squeeze = 1.0
        """Share of the budget a render may use; ``recover`` lowers it after an overflow."""
        self.failures = 0
        self.floor_warned = False
        """Whether a render found the floor (tool schemas and system prompt) over the
        budget already: ``BudgetFloorWarning`` is given once per engine."""
        self._frames: dict[str | None, _Frame] = {}
        self._memo: dict[tuple[str, str], Item] = {}
        self._summaries: dict[tuple[object, ...], Any] = {}
        self._records: list[CompactionRecord] = []
        self._owed: list[str] = []
        self._tool_tokens = self.counter.count_tools(self.tools)
        store = live.store if live is not None else None
        self.folder = (
            state_dir if isinstance(state_dir, StateFolder) else state_folder(store, state_dir)
        )
        """The database's state folder (offloaded outputs, the records log)."""
        self.storage = (
            None
            if store is None
            else ContextStorage(store, graph.session, self.folder, migrate=self.writer is not None)
        )
        if state_key is None:
            state_key = f"e{self.storage.epoch() if self.storage is not None else 0}"
        self._state_key = state_key
        """Tier state is kept by this key and the frame: the configuration epoch, which
        only an explicit, recorded configuration event changes (never a new Policy field)."""
        self._stored_upto = graph.last_seq
        """Nodes after this seq were appended while this engine ran: their counts are
        made here, not looked for in the store (see ``TokenCache.unstored``)."""
        self._load()

    @property
    def tool_tokens(self) -> int:
        """Tokens of the tool schemas every prompt goes out with (counted once per set)."""
        return self._tool_tokens

    def set_tools(self, tools: Sequence[dict[str, Any]]) -> None:
        """The tool schemas the next prompts go out with (counted in every render)."""
        if list(tools) != self.tools:
            self.tools = list(tools)
            self._tool_tokens = self.counter.count_tools(self.tools)

    @property
    def tier_names(self) -> list[str]:
        return [tier.name for tier in self.tiers]

    def anchor_usage(self, input_tokens: int, *, estimated: int | None = None) -> None:
        """Correct later estimates with the provider's reported input tokens for the last
        render (or for a prompt we estimated at ``estimated``); a reported success also
        resets the overflow count."""
        if estimated is None and self.last is not None:
            estimated = self.last.tokens
        if estimated is not None and input_tokens > 0:
            self.anchor.anchor_usage(estimated, input_tokens)
            self._save_anchor()
        self.note_success()

    def close(self) -> None:
        """Stop the summary worker, if any (summaries not started are dropped)."""
        if self.prefetch is not None:
            self.prefetch.close()

    def note_success(self) -> None:
        """The provider accepted the last prompt: forget earlier overflows."""
        self.failures = 0
        self.squeeze = 1.0

    # -- rendering --------------------------------------------------------------------
    def _build(self, unit: RawUnit, position: int, ctx: TierContext) -> Unit:
        items = tuple(self._item(message, node, ctx) for message, node in unit.entries)
        ids = tuple(dict.fromkeys(node.id for _, node in unit.entries if node is not None))
        return Unit(items, unit.kind, position, unit.pinned, unit.running, ids)

    def _item(self, message: dict[str, Any], node: Node | None, ctx: TierContext) -> Item:
        if node is None:
            return ctx.item(message, None, "full")
        tool_name = node.payload.name if node.kind == "tool" else None
        return ctx.item(message, node.id, _variant(message, node), tool_name)

    def _cap_callers(self, units: list[Unit], frame: str | None) -> list[Unit]:
        limit = self.policy.callers
        if frame is None or limit is None:
            return units
        callers = [i for i, u in enumerate(units) if not u.running and not u.pinned]
        first_running = next((i for i, u in enumerate(units) if u.running), len(units))
        callers = [i for i in callers if i < first_running]
        drop = set(callers[: max(0, len(callers) - limit)])
        return [u for i, u in enumerate(units) if i not in drop]

    def context(
        self,
        head: str | None = None,
        frame: str | None = None,
        *,
        preview: bool = False,
        carried: tuple[dict[str, TierState], dict[str, dict[str, Any]]] | None = None,
        decisions: TierDecisions | None = None,
    ) -> tuple[TierContext, View, _Frame]:
        """The context and the unprocessed view of a render (layers shown), for the tier
        functions that the engine's other entry points (collapse, compact) call. A
        ``preview`` context decides on copies of the sticky state (``carried``: the copies
        an earlier pass of the same preview changed, so its passes go on as a render's)."""
        state = self._frame(frame)
        budget = max(1, self.anchor.inverse(int(self.budget * self.squeeze)))
        ctx = TierContext(
            RenderInputs(self.graph, self.policy, self.clock(), frame, self.budget, self.folder),
            TierServices(
                self.counter,
                self.cache,
                self.summarizer,
                None if preview else self.prefetch,
                self.book,
                self._memo,
                self._summaries,
            ),
            budget,
            states=state.states
            if not preview
            else (carried[0] if carried is not None else copy.deepcopy(state.states)),
            scratch=state.scratch if not preview else (carried[1] if carried is not None else {}),
        )
        if decisions is not None:
            ctx.decisions = decisions
        if head is None and frame is None:
            head = self.graph.default_head()
        first = decisions is not None and self._first_render(state, frame)
        saved = state.restore
        if first:  # a long history's backlog, planned on the chain before any walk
            saved = chain_backlog(self.graph.state, head, ctx) or saved
        state.layout.update(self.graph.state, head, frame, saved, self.book.overlay)
        state.restore = None
        if first and not self.book.overlay:  # ...or, when it could not be, on the full walk
            build = functools.partial(self._build, ctx=ctx)
            compact_backlog(state.layout, ctx, build, self._prefetch, self.graph.state)
        self._prefetch(state.layout.unbuilt())
        walked = state.layout.units(lambda raw, at: self._build(raw, at, ctx))
        units = self._cap_callers(walked, frame)
        ctx.units = units
        ctx.first_changed = state.layout.first_built
        ctx.walks = state.layout.rebuilds
        ctx.compactable, ctx.kept_tools = state.layout.tools(walked, self.policy.tool_category)
        view = project(View(tuple(units), self._tool_tokens), ctx, self.book.active())
        if state.layout.hidden is not None and any(
            not u.items and u.kind != "layer" for u in view.units
        ):  # the checkpoint's layer did not hide its span: never show a placeholder
            state.layout = Layout()
            return self.context(head, frame, preview=preview, carried=carried, decisions=decisions)
        if not preview and frame is None and self.storage is not None:
            self._checkpoint(state, view, ctx)
        return ctx, view, state

    def _first_render(self, state: _Frame, frame: str | None) -> bool:
        """Whether this render meets a history with nothing decided on it yet: a fresh walk
        of the top frame, no tier state stored, no layer in the session (see ``_backlog``)."""
        if frame is not None or state.saved or state.restore is not None:
            return False
        if state.layout.head is not None or not any(
            as_tier(n) == "compact" for n in self.tier_names
        ):
            return False
        return not self.book.overlay and not self.graph.state.layers

    def render(
        self, head: str | None = None, frame: str | None = None, *, preview: bool = False
    ) -> Rendered:
        """The prompt for the next LLM call from ``head`` (inside ``frame`` if given).

        A render computes, then commits: the offload files it decided on are written, then
        its layers, tier state and records in one transaction (checked under the session's
        lock against what other processes stored; on a conflict it decides once more from
        there), and only then is the prompt returned. ``preview=True`` is :meth:`preview`.
        """
        if preview:
            return self.preview(head, frame)
        with self.lock:
            started = time.perf_counter()
            self.catch_up()
            self.rendering = (head, frame)
            owed: list[str] = []
            for attempt in range(2):
                decision = self._decide(head, frame, preview=False)
                if owed:  # files the first commit could not write (its step one): said first
                    error = "; ".join(owed)
                    ctx, view = decision.ctx, decision.view
                    ctx.act("offload", f"{len(owed)} file(s) not written", view, view, error=error)
                    ctx.record("offload", view, view, started=time.perf_counter(), error=error)
                    ctx.actions.insert(0, ctx.actions.pop())
                    ctx.records.insert(0, ctx.records.pop())
                rendered = self._rendered(decision)
                try:
                    problems = self._commit(decision, rendered)
                except Redo as redo:
                    self._forget(decision)
                    if self.writer is not None:  # what the refused transaction read is
                        self.writer.refresh()  # undone with it: read it again
                    if attempt:
                        raise CommitConflict(
                            f"a render of session {self.graph.session!r} still conflicts "
                            f"after deciding again: {redo}"
                        ) from redo.__cause__ or redo
                    self._redo(decision, redo)
                    owed = list(redo.problems)
                    continue
                for problem in problems:
                    decision.ctx.act(
                        "records", problem, decision.view, decision.view, error=problem
                    )
                self.last = rendered
                self._warn_floor(rendered)
                self.render_ms = (time.perf_counter() - started) * 1000
                return rendered
        raise AssertionError("unreachable")  # pragma: no cover

    def preview(self, head: str | None = None, frame: str | None = None) -> Rendered:
        """The next prompt, computed and not committed: no tier state, records, layers,
        offload files or token counts are written, so looking at a session never changes
        what the running agent will send."""
        with self.lock:
            started = time.perf_counter()
            overlay = dict(self.book.overlay)
            unsaved = self.cache.dirty()
            decision = self._decide(head, frame, preview=True)
            self.book.overlay = overlay
            self._unhide(decision.frame)
            self.cache.restore_dirty(unsaved)
            rendered = self._rendered(decision, preview=True)
            self.render_ms = (time.perf_counter() - started) * 1000
            return rendered

    def catch_up(self) -> None:
        """Read what other writers stored (appends, layers, rollbacks) before acting (a
        reader of a live session too: reading changes nothing stored)."""
        if self.book.refresh is not None:
            self.book.refresh()

    def _warn_floor(self, rendered: Rendered) -> None:
        if rendered.floor_fits or self.floor_warned:
            return
        self.floor_warned = True
        warnings.warn(
            f"session {self.graph.session!r}: the tool schemas ({self.tool_tokens:,} tokens) "
            f"and the system prompt ({rendered.floor - self.tool_tokens:,}) are over the "
            f"budget of {rendered.budget:,} tokens, so every prompt goes out over it "
            f"(this one: {rendered.tokens:,}); raise the budget or send fewer tools",
            BudgetFloorWarning,
            stacklevel=3,
        )

    def _rendered(self, decision: Decision, *, preview: bool = False) -> Rendered:
        ctx, view = decision.ctx, decision.view
        for problem in decision.problems:
            ctx.act(ctx.tier or "render", problem, view, view, error=problem)
        system = sum(u.tokens for u in view.units if u.kind == "system")
        return Rendered(
            messages=decision.messages,
            tokens=decision.tokens,
            budget=self.budget,
            actions=ctx.actions,
            records=ctx.records,
            context_management={"edits": ctx.edits} if ctx.edits else None,
            preview=preview,
            floor=view.extra_tokens + system,
        )


def _check_budget(budget: object) -> int:
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise PolicyError(f"budget must be a positive int, not {budget!r}")
    if budget <= 0:
        raise PolicyError(f"budget must be positive, got {budget}")
    if budget > MAX_TOKENS:
        raise PolicyError(f"budget must be at most {MAX_TOKENS:,} tokens (10**15)")
    return budget


def render_context(
    graph: GraphReader,
    *,
    budget: int | None = None,
    policy: Policy | None = None,
    head: str | None = None,
    frame: str | None = None,
    summarizer: Summarizer | None = None,
) -> Rendered:
    """Render once, with no memory of earlier renders (see ``ContextEngine`` for a loop).

    >>> from graph import ConversationGraph
    >>> g = ConversationGraph.memory()
    >>> _ = g.append({"role": "user", "content": "hello"})
    >>> render_context(g, budget=500).messages
    [{'role': 'user', 'content': 'hello'}]
    """
    engine = ContextEngine(graph, policy, summarizer, budget)
    return engine.render(head=head, frame=frame)
