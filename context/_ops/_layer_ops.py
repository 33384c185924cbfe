"""What a person (or the model, through tools) does to layers: collapse a range by hand,
compact now, roll a layer back, read what a layer or a finished function hides.

Every operation is a graph fact with a record, so a replay shows it at its turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TypeVar

import msgspec

from graph import (
    ChatMessage,
    GraphError,
    GraphReader,
    LayerError,
    LayerHandleTaken,
    LayerInfo,
    LayerNotFound,
    LayerRolledBack,
    inside,
    new_id,
    resolve_ref,
    steps_to_messages,
)

from .._commit._committer import Committer
from .._commit._writer import Redo
from .._errors import AlreadyRolledBack, CommitConflict, ContextError, UnknownLayer
from .._render._decision import Decision
from .._render._frame import Frame
from .._render._layout import Layout
from .._render._rendered import Rendered
from .._render._renderer import Renderer
from .._render._request import RenderRequest
from .._store._facts import CompactFacts
from .._store._records import CompactionRecord, wall_clock
from .._tiers._book import LayerBook, covered_steps
from .._tiers._collapse import collapse_segment
from .._tiers._compact import compact_now
from .._tiers._layers import project
from .._tiers._provider import provider_layer
from .._tiers._tier import TierContext
from .._view import TURN_KINDS, Unit, View

Done = TypeVar("Done")


def handle_retried(act: Callable[[], Done]) -> Done:
    """A manual layer operation, decided once more when another writer took the handle
    (``L<k>``) its layer was to have while it decided: nothing was stored, and the
    operation reads the store again, so the second time it picks the next free one."""
    try:
        return act()
    except CommitConflict as conflict:
        if not isinstance(conflict.__cause__, LayerHandleTaken):
            raise
    return act()


class LayerOps:
    """Collapse, compact, provider compaction, rollback and expand, over a renderer and
    the committer (the caller holds the engine's lock and passes the request)."""

    def __init__(
        self, graph: GraphReader, book: LayerBook, renderer: Renderer, committer: Committer
    ) -> None:
        self.graph = graph
        self.book = book
        self.renderer = renderer
        self.committer = committer

    def layers(self, *, active: bool | None = None) -> list[LayerInfo]:
        """This session's layers (collapses, compactions), oldest first."""
        found = [*self.graph.layers(), *self.book.overlay.values()]
        return found if active is None else [i for i in found if i.active == active]

    def layer(self, layer_id: str) -> LayerInfo:
        """One layer by id; an unknown one raises :class:`~context.UnknownLayer`."""
        return self.book.get(layer_id)

    def collapse(self, request: RenderRequest, from_node: str, to_node: str) -> LayerInfo:
        """Collapse the rounds from the one holding ``from_node`` to the one holding
        ``to_node`` into one summary layer, whatever the budget (nested layers allowed)."""
        ctx, view, state = self.renderer.view(request, checkpoint=True)
        units = list(view.units)
        first, last = _index_of(units, from_node), _index_of(units, to_node)
        if first == last and units[first].kind == "layer":  # inside one layer: refine it
            return self._refine(request, from_node, to_node)
        if first > last:
            first, last = last, first
        covered = units[first : last + 1]
        _collapsible(covered)
        ctx.tier = "collapse"
        after, error = collapse_segment(view, ctx, covered, reason="manual", force=True)
        self._settle(self._decided(request, ctx, after, state), "collapse")
        if error is not None:
            raise ContextError(f"collapse failed: {error}")
        return self.book.get(str(ctx.records[-1].details["layer"]))

    def _refine(self, request: RenderRequest, from_node: str, to_node: str) -> LayerInfo:
        """A manual collapse inside a layer's span (a compaction, a collapse): a finer
        layer over the rounds it covers, which shows there in the coarse layer's place
        (the coarse one shows once, at its first unit left); rolling it back restores the
        coarse prompt. Built on the walked units, never on a checkpoint's placeholders."""
        ctx, view, state = self.renderer.view(request, checkpoint=True)
        raw = list(ctx.units)
        first, last = sorted((_index_of(raw, from_node), _index_of(raw, to_node)))
        covered = raw[first : last + 1]
        if any(not unit.items for unit in covered):  # placeholders of a checkpointed span
            state.layout = Layout()
            ctx, view, state = self.renderer.view(request, checkpoint=True)
            raw = list(ctx.units)
            first, last = sorted((_index_of(raw, from_node), _index_of(raw, to_node)))
            covered = raw[first : last + 1]
        _collapsible(covered)
        ctx.tier = "collapse"
        walked = View(tuple(raw), view.extra_tokens)
        _, error = collapse_segment(walked, ctx, covered, reason="manual", force=True)
        after = project(walked, ctx, self.book.active()) if error is None else view
        self._settle(self._decided(request, ctx, after, state), "collapse")
        if error is not None:
            raise ContextError(f"collapse failed: {error}")
        return self.book.get(str(ctx.records[-1].details["layer"]))

    def compact(
        self, request: RenderRequest, focus: str | None = None
    ) -> tuple[LayerInfo, Rendered, CompactionRecord | None]:
        """``/compact [focus]``: one compaction of all but the newest rounds, now. It is
        decided as a render that compacts first, so what it commits is the next prompt,
        returned with the layer (a compaction that fails commits what was re-applied)."""
        made: list[LayerInfo] = []
        failed: list[ContextError] = []

        before: list[int] = []

        def now(view: View, ctx: TierContext) -> View:
            before.append(view.tokens)  # the next prompt as it stood, decisions re-applied
            try:
                after, info = compact_now(view, ctx, focus)
            except ContextError as error:
                failed.append(error)
                return view
            made.append(info)
            return after

        decision = self.renderer.decide(request, force=now)
        record = None
        if made:
            head = request.head or self.graph.default_head()
            record = _as_printed(decision, made[0].id, before[0], head)
        self._settle(decision, "compaction")
        if failed:
            raise failed[0]
        [info] = made
        layer = self.graph.layer(info.id) if self.committer.writer is not None else info
        return layer, decision.rendered(), record

    def provider_compaction(
        self,
        request: RenderRequest,
        items: Sequence[Mapping[str, object]],
        provider: str = "anthropic",
    ) -> LayerInfo | None:
        """Keep what a provider's own compaction returned (``items``) as a layer over the
        units of the prompt rendered from ``head`` — the prompt it compacted."""
        ctx, view, state = self.renderer.view(request, checkpoint=True)
        ctx.tier = "provider"
        after, info = provider_layer(ctx, view, items, provider)
        self._settle(
            self._decided(request, ctx, after, state),
            "provider compaction",
        )
        if info is None or self.committer.writer is None:
            return info
        return self.graph.layer(info.id)

    def rollback(
        self, preview: RenderRequest, layer_id: str, reason: str | None = None
    ) -> tuple[list[LayerInfo], CompactionRecord]:
        """Roll back a layer and every layer built on it; the covered messages show again,
        exactly as before the layer was made. The record says what it cost the next
        prompt (``preview`` rendered before, and after inside the rollback's transaction)."""
        info = self.book.get(layer_id)
        layer_id = info.id  # a handle (``L3``) names it too
        started = time.perf_counter()
        before = self.renderer.decide(preview).tokens
        if layer_id in self.book.overlay:
            done = self.book.rollback(layer_id)
            after = self.renderer.decide(preview)
            record = _rollback_record(
                self.graph, preview.now, info, done, reason, started, before, after
            )
            self.committer.kept.append(record)
            self.committer.hooks.notify([record])
            return done, record
        writer, storage = self.committer.writer, self.committer.storage
        if writer is None:
            raise ContextError(f"this graph is read-only; layer {layer_id} cannot roll back")
        try:
            with writer.batch():
                done = writer.rollback_layer(layer_id, reason)
                after = self.renderer.decide(preview)  # shown in this transaction
                record = _rollback_record(
                    self.graph, preview.now, info, done, reason, started, before, after
                )
                if storage is not None:
                    storage.write_records([record], self.graph.last_seq)
        except LayerRolledBack as error:
            raise AlreadyRolledBack(str(error)) from error
        except LayerNotFound as error:
            raise UnknownLayer(str(error)) from error
        except LayerError as error:
            raise ContextError(str(error)) from error
        if storage is not None:
            storage.written()
            storage.log_records([record])
        self.committer.hooks.notify([record])
        return done, record

    def _decided(
        self, request: RenderRequest, ctx: TierContext, view: View, state: Frame
    ) -> Decision:
        """What a manual operation decided: the layers it made, on its own view."""
        return Decision(request, ctx, view, state, [], 0, tuple(self.book.pending()))

    def _settle(self, decision: Decision, what: str) -> None:
        """Commit what a manual operation decided; a conflict with another writer's layer
        is refused with :class:`CommitConflict` (a person asked for this one layer)."""
        try:
            self.committer.commit(decision)
        except Redo as conflict:
            self.renderer.forget(decision)
            if self.book.refresh is not None:
                self.book.refresh()
            cause = conflict.__cause__ or conflict
            raise CommitConflict(f"{what} refused: {conflict}") from cause

    def expand(self, layer_or_node: str, *, depth: int = 1) -> list[ChatMessage]:
        """The original messages under a layer, or a finished function's own messages as
        they were shown inside it while it ran (``depth`` > 1 opens nested functions)."""
        node = resolve_ref(self.graph.state, layer_or_node)
        if node is not None and node in self.graph and self.graph.get(node).kind == "function":
            try:
                return steps_to_messages(inside(self.graph.state, node, depth))
            except GraphError as error:
                raise ContextError(str(error)) from error
        info = self.book.get(layer_or_node)
        return steps_to_messages(covered_steps(self.graph, info.covers))


def _as_printed(
    decision: Decision, layer: str, before: int, head: str | None
) -> CompactionRecord | None:
    """The compaction's record says what the command prints: the next prompt before it
    (earlier decisions re-applied) and after it (the prompt committed, with the request
    and integrity turns the view it was cut from lacked); the head it acted at too."""
    records = decision.ctx.records
    for index, record in enumerate(records):
        facts = record.facts
        if isinstance(facts, CompactFacts) and facts.layer == layer:
            after = decision.tokens
            records[index] = msgspec.structs.replace(
                record,
                tokens_before=before,
                tokens_after=after,
                ratio=round(after / before, 4) if before else 1.0,
                messages_after=len(decision.messages),
                head=head,
            )
            return records[index]
    return None


def _rollback_record(
    graph: GraphReader,
    now: datetime,
    info: LayerInfo,
    done: list[LayerInfo],
    reason: str | None,
    started: float,
    before: int,
    next_render: Decision,
) -> CompactionRecord:
    """The record of a rollback: the next prompt before and after it, and the layers that
    next render makes again where the restored rounds do not fit whole (``again``)."""
    after = next_render.tokens
    again = [
        {"kind": made.kind, "covers": len(made.covers), "first": made.covers[0]}
        for made in next_render.layers
        if made.covers
    ]
    return CompactionRecord(
        id=new_id(),
        session=graph.session,
        timestamp=wall_clock(),
        tier="rollback",
        tokens_before=before,
        tokens_after=after,
        ratio=round(after / before, 4) if before else 1.0,
        messages_before=0,
        messages_after=len(next_render.messages),
        summarized=0,
        preserved=len(info.covers),
        duration_ms=round((time.perf_counter() - started) * 1000, 3),
        details={
            "layer": info.id,
            "layers": [i.id for i in done],
            "reason": reason,
            "kind": info.kind,
            "again": again,
        },
        head=graph.default_head(),
        clock=now.isoformat(),
    )


def _index_of(units: list[Unit], node_id: str) -> int:
    for index, unit in enumerate(units):
        if node_id in unit.node_ids:
            return index
    raise UnknownLayer(f"node {node_id!r} is not in the rendered conversation")


def _collapsible(covered: list[Unit]) -> None:
    """Refuse a manual collapse over what cannot be summarized away."""
    for unit in covered:
        if unit.pinned or unit.running or (unit.kind not in TURN_KINDS and unit.kind != "layer"):
            where = f"node {unit.node_ids[0] if unit.node_ids else '?'}"
            what = "the system prompt or the task" if unit.pinned else f"a {unit.kind}"
            if unit.running:
                what = "a running function"
            elif unit.kind == "layer":
                what, where = "a compaction", f"layer {unit.layer}"
            raise ContextError(
                f"cannot collapse {what} ({where}); pick rounds or finished functions"
            )
