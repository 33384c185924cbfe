"""``ContextEngine``: the graph, rendered under a budget, as a facade over small objects.

The engine builds and holds them, takes the lock, and delegates: a ``Renderer`` decides
(the graph walked from a head into a view, the ``Cascade`` of tiers run on it, a
``Decision``), the ``Committer`` writes what was decided (the only writer), ``LayerOps``
are the manual operations and ``Recovery`` the reaction to an overflow. Each render is
decided from a frozen ``RenderRequest``. Nothing stored is ever changed; what tiers decided
is persisted, so a restarted process renders the same prompt.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec

from graph import ChatMessage, ConversationGraph, GraphReader, LayerInfo, ToolSchema

from ._budget._anchor import UsageAnchor
from ._budget._policy import MAX_TOKENS, Policy
from ._budget._tokens import TokenCache, TokenCounter
from ._commit._hooks import Committed, Hooks
from ._commit._writer import Redo, SessionWriter
from ._errors import CommitConflict, ContextError, PolicyError
from ._ops._layer_ops import handle_retried
from ._ops._parts import Shared, engine_parts
from ._ops._recovery import Recovery
from ._render._frame import Frame
from ._render._layout import Layout
from ._render._rendered import Rendered
from ._render._request import RenderRequest
from ._render._tools import PromptTools
from ._store._folder import StateFolder, state_folder
from ._store._records import CompactionRecord
from ._store._storage import ContextStorage
from ._summaries._heuristic import default_summarizer
from ._summaries._prefetch import Prefetcher
from ._summaries._summary import Summarizer
from ._tiers._book import LayerBook
from ._tiers._registry import resolve_tiers
from ._tiers._tier import Tier, TierContext, TierDecisions, TierState
from ._view import View

EXACT_COUNT_CHARS = 200_000
"""Longer texts are counted by an upper bound, not tokenized (see ``TokenCounter``)."""


class ContextEngine:
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
        tools: Sequence[ToolSchema] = (),
        clock: Callable[[], datetime] | None = None,
        on_record: Callable[[CompactionRecord], None] | None = None,
        tiers: Sequence[Tier | str] | None = None,
        state_dir: StateFolder | str | os.PathLike[str] | None = None,
        state_key: str | None = None,
        read_only: bool = False,
    ) -> None:
        self.graph = graph
        self.policy = policy = policy or Policy()
        summarizer = summarizer if summarizer is not None else default_summarizer(policy)
        self.prefetch = Prefetcher.wanted(summarizer, policy)
        """Summaries computed ahead of need, for an LLM summarizer that wants them."""
        self.budget = _check_budget(budget if budget is not None else policy.budget)
        self.clock = clock or (lambda: datetime.now(UTC))
        """Read once per render (a replay sets a stopped clock per turn)."""
        self.hooks = Hooks()
        if on_record is not None:
            self.hooks.records.append(on_record)
        self.counter = TokenCounter(policy.model, exact_limit=EXACT_COUNT_CHARS, lazy=True)
        self.anchor = UsageAnchor()
        self.last: Rendered | None = None
        """The last prompt a render returned (what was sent, for the runtime)."""
        self.decided: Rendered | None = None
        """The next prompt as the last ``compact`` committed it (its after-figure)."""
        self.operation: CompactionRecord | None = None
        """The record of the last ``compact`` or ``rollback``: the figures a command prints."""
        self.render_ms = 0.0
        writer: SessionWriter | None = (
            graph if isinstance(graph, ConversationGraph) and not read_only else None
        )
        live = graph if isinstance(graph, ConversationGraph) else None
        self.lock: threading.RLock = live._lock if live is not None else threading.RLock()
        """Held by every render and layer operation: the graph's own lock when it has one,
        so a render never sees a half-applied append from another thread."""
        self.prompt_tools = PromptTools(self.counter, tools)
        store = live.store if live is not None else None
        self.folder = (
            state_dir if isinstance(state_dir, StateFolder) else state_folder(store, state_dir)
        )
        """The database's state folder (offloaded outputs, the records log)."""
        self.storage = (
            None
            if store is None
            else ContextStorage(store, graph.session, self.folder, migrate=writer is not None)
        )
        self.epoch = self.storage.epoch() if self.storage is not None else 0
        """The configuration epoch this engine renders under, read once: its tier state is
        kept under it, so a later configuration event (a new epoch) needs a new engine."""
        if state_key is None:
            state_key = f"e{self.epoch}"
        """Tier state is kept by this key and the frame: the configuration epoch, which
        only an explicit, recorded configuration event changes (never a new Policy field)."""
        self._shared = Shared(
            policy,
            self.storage,
            self.folder,
            self.counter,
            self.hooks,
            state_key,
            resolve_tiers(tiers if tiers is not None else policy.cascade),
        )
        self._assemble(writer, summarizer)
        self.recovery = Recovery(policy)
        if self.storage is not None:
            saved = self.storage.load_state(f"{state_key}:anchor")
            if saved:
                self.anchor = UsageAnchor.from_state(msgspec.json.decode(saved))

    def _assemble(self, writer: SessionWriter | None, summarizer: Summarizer) -> None:
        """The parts that keep what renders read and decided (see ``_ops._parts``)."""
        parts = engine_parts(self.graph, self._shared, writer, summarizer, self.prefetch)
        self.frames, self.renderer, self.committer, self.ops = parts
        if self.counter.as_sent:
            self.renderer.cache.tag = "sent"
        self._reloads = self.graph.state.reloads

    def _after_scrub(self) -> None:
        """Drop what was kept from text a scrub (another process's) has since rewritten."""
        if self.graph.state.reloads == self._reloads:
            return
        if self.prefetch is not None:
            self.prefetch.close()
            self.prefetch = Prefetcher(self.summarizer)
        self.decided = None
        self._assemble(self.writer, self.summarizer)

    # -- what callers read and set --------------------------------------------------
    @property
    def summarizer(self) -> Summarizer:
        """Used by the summarizing tiers (collapse, compact); heuristic unless given."""
        return self.renderer.summarizer

    @summarizer.setter
    def summarizer(self, summarizer: Summarizer) -> None:
        self.renderer.summarizer = summarizer

    @property
    def tiers(self) -> list[Tier]:
        return self.renderer.cascade.tiers

    @property
    def tier_names(self) -> list[str]:
        return [tier.name for tier in self.tiers]

    @property
    def tools(self) -> list[ToolSchema]:
        """The tool schemas every prompt goes out with."""
        return self.prompt_tools.schemas

    @property
    def tool_tokens(self) -> int:
        """Tokens of the tool schemas every prompt goes out with (counted once per set)."""
        return self.prompt_tools.tokens

    def set_tools(self, tools: Sequence[ToolSchema]) -> None:
        """The tool schemas the next prompts go out with (counted in every render)."""
        self.prompt_tools.set(tools)

    def count_as_sent(self) -> None:
        """Count messages and tool schemas as the JSON a client sends from now on (a
        framework adapter's session; ``TokenCounter.as_sent``), cached apart."""
        if self.counter.as_sent:
            return
        with self.lock:
            self.counter.as_sent = True
            self.cache.tag = "sent"
            self.prompt_tools.recount()
            self.renderer.memo.clear()  # items counted the plain way are built again
            for frame in self.frames.by_key.values():
                frame.layout = Layout()

    @property
    def incremental(self) -> bool:
        """Whether a render resumes the last render's final passes (integrity repairs,
        sources) past the messages it shares with it (the default), or makes them over the
        whole prompt (False: the reference the equivalence tests compare with, and the
        "before" of the benchmarks). Both give the same prompt, byte for byte."""
        return self.renderer.cascade.incremental

    @incremental.setter
    def incremental(self, on: bool) -> None:
        with self.lock:
            self.renderer.cascade.incremental = on

    @property
    def writer(self) -> SessionWriter | None:
        """What the engine writes through; None for a reader (a past seq, ``read_only``),
        whose decisions stay in memory and which never writes or migrates anything."""
        return self.committer.writer

    @property
    def book(self) -> LayerBook:
        return self.renderer.book

    @property
    def cache(self) -> TokenCache:
        return self.renderer.cache

    @property
    def squeeze(self) -> float:
        """Share of the budget a render may use; ``recover`` lowers it after an overflow."""
        return self.recovery.squeeze

    @property
    def failures(self) -> int:
        return self.recovery.failures

    @property
    def fences(self) -> list[Callable[[], None]]:
        """Called inside every commit's transaction, under the session's lock: one that
        raises refuses the commit (a writer whose lease was taken is fenced off)."""
        return self.hooks.fences

    @property
    def commit_hooks(self) -> list[Callable[[Committed], None]]:
        """Called inside a render's transaction with what it committed: the render
        receipt is written here, atomically with the decisions it was rendered under."""
        return self.hooks.commits

    @property
    def callbacks(self) -> list[Callable[[CompactionRecord], None]]:
        """Called with every record, once it is stored."""
        return self.hooks.records

    @property
    def _frames(self) -> dict[str | None, Frame]:
        return self.frames.by_key

    @property
    def _state_key(self) -> str:
        return self.frames.state_key

    def request(
        self,
        head: str | None = None,
        frame: str | None = None,
        *,
        preview: bool = False,
    ) -> RenderRequest:
        """What a render from ``head`` (in ``frame``) would be decided from, now."""
        return RenderRequest(
            head,
            frame,
            self.budget,
            self.clock(),
            self.anchor,
            squeeze=self.recovery.squeeze,
            tools=tuple(self.tools),
            tool_tokens=self.tool_tokens,
            preview=preview,
        )

    # -- rendering --------------------------------------------------------------------
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
            request = self.request(head, frame)
            owed: list[str] = []
            for attempt in range(2):
                decision = self.renderer.decide(request, owed=owed)
                rendered = decision.rendered()
                try:
                    problems = self.committer.commit(decision, rendered)
                except Redo as redo:
                    self.renderer.forget(decision)
                    if self.writer is not None:  # what the refused transaction read is
                        self.writer.refresh()  # undone with it: read it again
                    if attempt:
                        raise CommitConflict(
                            f"a render of session {self.graph.session!r} still conflicts "
                            f"after deciding again: {redo}"
                        ) from redo.__cause__ or redo
                    self.frames.keep_inline(decision.frame, redo.failed)
                    owed = list(redo.problems)
                    continue
                for problem in problems:
                    decision.ctx.act(
                        "records", problem, decision.view, decision.view, error=problem
                    )
                self.last = rendered
                self.prompt_tools.warn_floor(rendered, self.graph.session)
                self.render_ms = (time.perf_counter() - started) * 1000
                return rendered
        raise AssertionError("unreachable")  # pragma: no cover

    def preview(self, head: str | None = None, frame: str | None = None) -> Rendered:
        """The next prompt, computed and not committed: no tier state, records, layers,
        offload files or token counts are written, so looking at a session never changes
        what the running agent will send."""
        with self.lock:
            started = time.perf_counter()
            self._after_scrub()
            rendered = self.renderer.decide(self.request(head, frame, preview=True)).rendered()
            self.render_ms = (time.perf_counter() - started) * 1000
            return rendered

    def context(
        self,
        head: str | None = None,
        frame: str | None = None,
        *,
        preview: bool = False,
        carried: tuple[dict[str, TierState], dict[str, dict[str, Any]]] | None = None,
        decisions: TierDecisions | None = None,
    ) -> tuple[TierContext, View, Frame]:
        """The context and the unprocessed view of a render (layers shown), as the tiers
        see it before they act."""
        with self.lock:
            self._after_scrub()
            request = self.request(head, frame, preview=preview)
            return self.renderer.view(
                request, carried=carried, decisions=decisions, checkpoint=True
            )

    def catch_up(self) -> None:
        """Read what other writers stored (appends, layers, rollbacks, a scrub) before
        acting (a reader of a live session too: reading changes nothing stored)."""
        if self.book.refresh is not None:
            self.book.refresh()
        self._after_scrub()

    def _caught_up(self, head: str | None, frame: str | None) -> RenderRequest:
        self.catch_up()
        return self.request(head, frame)

    def records(self) -> list[CompactionRecord]:
        """This session's compaction records, oldest first (from the database if any)."""
        return self.committer.records()

    def anchor_usage(self, input_tokens: int, *, estimated: int | None = None) -> None:
        """Correct later estimates with the provider's reported input tokens for the last
        render (or for a prompt we estimated at ``estimated``); a reported success also
        resets the overflow count."""
        if estimated is None and self.last is not None:
            estimated = self.last.tokens
        if estimated is not None and input_tokens > 0:
            self.anchor.anchor_usage(estimated, input_tokens)
            self.committer.save_anchor(self.anchor)
        self.note_success()

    def note_success(self) -> None:
        """The provider accepted the last prompt: forget earlier overflows."""
        self.recovery.note_success()

    def close(self) -> None:
        """Stop the summary worker, if any (summaries not started are dropped)."""
        if self.prefetch is not None:
            self.prefetch.close()

    # -- layers -----------------------------------------------------------------------
    def layers(self, *, active: bool | None = None) -> list[LayerInfo]:
        """This session's layers (collapses, compactions), oldest first."""
        return self.ops.layers(active=active)

    def layer(self, layer_id: str) -> LayerInfo:
        """One layer by id; an unknown one raises :class:`~context.UnknownLayer`."""
        return self.ops.layer(layer_id)

    def collapse(
        self,
        from_node: str,
        to_node: str,
        *,
        head: str | None = None,
        frame: str | None = None,
    ) -> LayerInfo:
        """Collapse the rounds from the one holding ``from_node`` to the one holding
        ``to_node`` into one summary layer, whatever the budget (nested layers allowed)."""
        with self.lock:
            return handle_retried(
                lambda: self.ops.collapse(self._caught_up(head, frame), from_node, to_node)
            )

    def compact(
        self, focus: str | None = None, *, head: str | None = None, frame: str | None = None
    ) -> LayerInfo:
        """``/compact [focus]``: one compaction of all but the newest rounds, now; the
        next prompt it committed is :attr:`decided`."""
        with self.lock:
            done = handle_retried(lambda: self.ops.compact(self._caught_up(head, frame), focus))
            info, self.decided, self.operation = done
            return info

    def provider_compaction(
        self,
        items: Sequence[Mapping[str, object]],
        *,
        head: str | None = None,
        frame: str | None = None,
        provider: str = "anthropic",
    ) -> LayerInfo | None:
        """Keep what a provider's own compaction returned (``items``) as a layer over the
        units of the prompt rendered from ``head`` — the prompt it compacted."""
        with self.lock:
            return handle_retried(
                lambda: self.ops.provider_compaction(self._caught_up(head, frame), items, provider)
            )

    def rollback(self, layer_id: str, reason: str | None = None) -> list[LayerInfo]:
        """Roll back a layer and every layer built on it; the covered messages show again,
        exactly as before the layer was made (its record says what the next prompt was
        before and after)."""
        with self.lock:
            self.catch_up()
            done, self.operation = self.ops.rollback(self.request(preview=True), layer_id, reason)
            return done

    def expand(self, layer_or_node: str, *, depth: int = 1) -> list[ChatMessage]:
        """The original messages under a layer, or a finished function's own messages as
        they were shown inside it while it ran (``depth`` > 1 opens nested functions)."""
        with self.lock:
            return self.ops.expand(layer_or_node, depth=depth)

    # -- tier 5 -----------------------------------------------------------------------
    def recover(
        self, error: BaseException, *, head: str | None = None, frame: str | None = None
    ) -> Rendered:
        """A harder render after ``error`` (a context overflow), or
        :class:`~context.ContextOverflowError` on the third failure in a row."""
        with self.lock:
            overflow = self.recovery.overflow(error, self.last)
            if overflow.counted is not None and overflow.before > 0:
                self.anchor.anchor_usage(overflow.before, overflow.counted[0])
                self.committer.save_anchor(self.anchor)
            steps = [f"budget × {self.recovery.squeeze:.2f}"]
            if overflow.compact_first:
                try:
                    self.compact(head=head, frame=frame)
                    steps.append("compacted")
                except ContextError as failed:
                    steps.append(f"could not compact: {failed}")
            rendered = self.render(head, frame)
            record = self.recovery.record(
                overflow, rendered, steps, self.graph.session, self.clock()
            )
            self.committer.log(record)
            return rendered


def _check_budget(budget: object) -> int:
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise PolicyError(f"budget must be a positive int, not {budget!r}")
    if budget <= 0:
        raise PolicyError(f"budget must be positive, got {budget}")
    if budget > MAX_TOKENS:
        raise PolicyError(f"budget must be at most {MAX_TOKENS:,} tokens (10**15)")
    return budget
