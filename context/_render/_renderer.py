"""``Renderer``: the pure step of a render, from a request to a ``Decision``.

It walks the graph from the request's head (and frame), groups the visible nodes into
units, shows active layers in place of what they cover, and hands that view to the
cascade; a render that made a layer is decided again over it. Nothing is written here:
the committer writes what a decision holds, and a preview decides on drafts of the layer
book and token cache and on copies of the sticky state, so it needs nothing put back.
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable, Iterable
from typing import Any

from graph import ChatMessage, GraphReader, Node

from .._budget._policy import Policy
from .._budget._tokens import TokenCache, TokenCounter
from .._store._folder import StateFolder
from .._store._storage import ContextStorage
from .._summaries._prefetch import Prefetcher
from .._summaries._summary import Summarizer
from .._tiers._book import LayerBook
from .._tiers._layers import project
from .._tiers._tier import RenderInputs, TierContext, TierDecisions, TierServices, TierState
from .._view import RESULT_VARIANTS, Item, RawUnit, Unit, Variant, View
from ._backlog_chain import chain_backlog
from ._backlog_walk import compact_backlog
from ._cascade import Cascade
from ._checkpoint import capture
from ._decision import Decision
from ._frame import Frame, FrameStore
from ._layout import Layout
from ._request import RenderRequest

MAX_PASSES = 8
"""Times a render is made at most while each one still makes a layer (see ``decide``)."""
LOAD_ALL_KEYS = 4_096
"""A render that builds more units' items than this reads every stored count at once."""

Forced = Callable[[View, TierContext], View]
"""An operation run once on the first pass, after the earlier decisions are re-applied
and before the tiers act (``compact`` now): the decision is then the next prompt."""


class Renderer:
    """Decides renders: builds the view of a request and runs the cascade on it."""

    def __init__(
        self,
        graph: GraphReader,
        policy: Policy,
        cascade: Cascade,
        book: LayerBook,
        frames: FrameStore,
        counter: TokenCounter,
        cache: TokenCache,
        summarizer: Summarizer,
        prefetch: Prefetcher | None,
        folder: StateFolder,
        storage: ContextStorage | None,
    ) -> None:
        self.graph = graph
        self.policy = policy
        self.cascade = cascade
        self.book = book
        self.frames = frames
        self.counter = counter
        self.cache = cache
        self.summarizer = summarizer
        self.prefetch = prefetch
        self.folder = folder
        self.storage = storage
        self.memo: dict[tuple[str, str], Item] = {}
        self.summaries: dict[tuple[object, ...], Any] = {}
        self.stored_upto = graph.last_seq
        """Nodes after this seq were appended while this engine ran: their counts are
        made here, not looked for in the store (see ``TokenCache.unstored``)."""

    def decide(
        self, request: RenderRequest, *, owed: Iterable[str] = (), force: Forced | None = None
    ) -> Decision:
        """The prompt and the decisions it rests on, nothing written.

        A render that made a layer is made again over the new layer, as the next render
        would be, until one makes none: so the next render over the same graph (same
        clock and recovery state) finds nothing to do and shows the same bytes. ``owed``:
        offload files an earlier commit of this render could not write, said first."""
        book = self.book.draft() if request.preview else self.book
        cache = self.cache.draft() if request.preview else self.cache
        decisions = TierDecisions()
        carried = None
        for _ in range(MAX_PASSES):
            known = len(book.overlay)
            ctx, view, state = self.view(
                request, book=book, cache=cache, carried=carried, decisions=decisions
            )
            if request.preview:
                carried = (ctx.states, ctx.scratch)
            taken = (state.layout.rebuilds, ctx.layer_key)
            projected = view
            view = self.cascade.prepare(view, ctx)
            if force is not None:
                view, force = force(view, ctx), None
            view = self.cascade.compact_pass(view, ctx)
            view = self.cascade.with_request(view, ctx)
            if self._checkpoints(request):  # layers this render made may hide a span
                changed = (state.layout.rebuilds, ctx.layer_key) != taken
                self.checkpoint(state, view if changed else projected, ctx, book)
            messages, tokens, sources = self.cascade.finish(view, ctx)
            if tokens > ctx.budget >= view.tokens:
                # Integrity added a turn (a provider's role rules): make room for it too.
                budget = ctx.budget
                ctx.budget = budget - (tokens - view.tokens)
                view = self.cascade.compact_pass(view, ctx)
                ctx.budget = budget
                messages, tokens, sources = self.cascade.finish(view, ctx)
            if len(book.overlay) == known:
                break
        if request.preview:
            self.frames.unhide(state, self.book)
        owed = list(owed)
        if owed:  # files the first commit could not write (its step one): said first
            error = "; ".join(owed)
            ctx.act("offload", f"{len(owed)} file(s) not written", view, view, error=error)
            ctx.record("offload", view, view, started=time.perf_counter(), error=error)
            ctx.actions.insert(0, ctx.actions.pop())
            ctx.records.insert(0, ctx.records.pop())
        return Decision(
            request, ctx, view, state, messages, tokens, tuple(book.pending()), sources=sources
        )

    def view(
        self,
        request: RenderRequest,
        *,
        book: LayerBook | None = None,
        cache: TokenCache | None = None,
        carried: tuple[dict[str, TierState], dict[str, dict[str, Any]]] | None = None,
        decisions: TierDecisions | None = None,
        checkpoint: bool = False,
    ) -> tuple[TierContext, View, Frame]:
        """The context and the unprocessed view of a render (layers shown). A preview
        decides on copies of the sticky state (``carried``: the copies an earlier pass of
        the same preview changed, so its passes go on as a render's)."""
        book = book or self.book
        cache = cache or self.cache
        frame, preview = request.frame, request.preview
        state = self.frames.get(frame)
        ctx = TierContext(
            RenderInputs(self.graph, self.policy, request.now, frame, request.budget, self.folder),
            TierServices(
                self.counter,
                cache,
                self.summarizer,
                None if preview else self.prefetch,
                book,
                self.memo,
                self.summaries,
            ),
            request.effective,
            states=state.states
            if not preview
            else (carried[0] if carried is not None else copy.deepcopy(state.states)),
            scratch=state.scratch if not preview else (carried[1] if carried is not None else {}),
        )
        if decisions is not None:
            ctx.decisions = decisions
        head = request.head
        if head is None and frame is None:
            head = self.graph.default_head()
        first = decisions is not None and self._first_render(state, frame, book)
        saved = state.restore
        if first:  # a long history's backlog, planned on the chain before any walk
            saved = chain_backlog(self.graph.state, head, ctx) or saved
        state.layout.update(self.graph.state, head, frame, saved, book.overlay)
        state.restore = None
        if first and not book.overlay:  # ...or, when it could not be, on the full walk
            build = functools.partial(self._build, ctx=ctx)
            compact_backlog(state.layout, ctx, build, self._prefetch_counts, self.graph.state)
        self._prefetch_counts(state.layout.unbuilt())
        walked = state.layout.units(lambda raw, at: self._build(raw, at, ctx))
        units = self._cap_callers(walked, frame)
        ctx.units = units
        ctx.first_changed = state.layout.first_built
        ctx.walks = state.layout.rebuilds
        ctx.compactable, ctx.kept_tools = state.layout.tools(walked, self.policy.tool_category)
        view = project(View(tuple(units), request.tool_tokens), ctx, book.active())
        if state.layout.hidden is not None and any(
            not u.items and u.kind != "layer" for u in view.units
        ):  # the checkpoint's layer did not hide its span: never show a placeholder
            state.layout = Layout()
            return self.view(
                request,
                book=book,
                cache=cache,
                carried=carried,
                decisions=decisions,
                checkpoint=checkpoint,
            )
        if checkpoint and self._checkpoints(request):
            self.checkpoint(state, view, ctx, book)
        return ctx, view, state

    def forget(self, decision: Decision) -> None:
        """Drop what a refused commit decided: its layers, and tier state since the last
        commit (what the stored state says)."""
        self.book.settle(info.id for info in decision.layers)
        self.frames.reset(decision.frame, self.book)

    def checkpoint(self, state: Frame, view: View, ctx: TierContext, book: LayerBook) -> None:
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
            layout, view, self.graph.state, self.policy.tool_category, book.overlay
        )

    def _checkpoints(self, request: RenderRequest) -> bool:
        return not request.preview and request.frame is None and self.storage is not None

    def _first_render(self, state: Frame, frame: str | None, book: LayerBook) -> bool:
        """Whether this render meets a history with nothing decided on it yet: a fresh walk
        of the top frame, no tier state stored, no layer in the session (see ``_backlog``)."""
        if frame is not None or state.saved or state.restore is not None:
            return False
        if state.layout.head is not None:
            return False
        if all(tier.name != "compact" for tier in self.cascade.tiers):
            return False
        return not book.overlay and not self.graph.state.layers

    def _build(self, unit: RawUnit, position: int, ctx: TierContext) -> Unit:
        items = tuple(self._item(message, node, ctx) for message, node in unit.entries)
        ids = tuple(dict.fromkeys(node.id for _, node in unit.entries if node is not None))
        return Unit(items, unit.kind, position, unit.pinned, unit.running, ids)

    def _item(self, message: ChatMessage, node: Node | None, ctx: TierContext) -> Item:
        if node is None:
            return ctx.item(message, None, "full")
        tool_name = node.payload.name if node.kind == "tool" else None
        return ctx.item(message, node.id, variant_of(message, node), tool_name)

    def _cap_callers(self, units: list[Unit], frame: str | None) -> list[Unit]:
        limit = self.policy.callers
        if frame is None or limit is None:
            return units
        callers = [i for i, u in enumerate(units) if not u.running and not u.pinned]
        first_running = next((i for i, u in enumerate(units) if u.running), len(units))
        callers = [i for i in callers if i < first_running]
        drop = set(callers[: max(0, len(callers) - limit)])
        return [u for i, u in enumerate(units) if i not in drop]

    def _prefetch_counts(self, units: Iterable[RawUnit]) -> None:
        """Read the stored token counts of the units about to be built in one go: by key
        for a few units, all of the session's when many are (a full walk)."""
        cache = self.cache
        loader = cache.loader
        if loader is None:
            return
        keys = []
        for unit in units:
            for message, node in unit.entries:
                if node is None:
                    continue
                if node.seq > self.stored_upto:
                    cache.unstored.add(node.id)
                else:
                    keys.append(f"{node.id}:{variant_of(message, node)}")
        if len(keys) <= LOAD_ALL_KEYS:
            cache.prefetch(keys)
            return
        try:
            cache.update(loader(None))
        except Exception:  # fail-open: counted again (and saved) instead
            return
        cache.loader = None  # every stored count is known now


def variant_of(message: ChatMessage, node: Node) -> Variant:
    """How a walked node is shown before any tier acts (part of its token-count key)."""
    if node.kind == "tool":
        return "full" if node.result is not None else "pending"
    if node.kind == "function":
        return "call" if message.get("role") == "assistant" else RESULT_VARIANTS[node.status]
    return "full"
