"""What a person (or the model, through tools) does to layers: collapse a range by hand,
compact now, roll a layer back, read what a layer or a finished function hides.

Every operation is a graph fact with a record, so a replay shows it at its turn.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from graph import (
    GraphError,
    LayerError,
    LayerInfo,
    LayerNotFound,
    LayerRolledBack,
    Step,
    inside,
    new_id,
    steps_to_messages,
)

from ._collapse import collapse_segment
from ._commit import Decision, Redo
from ._compact import compact_now
from ._errors import AlreadyRolledBack, CommitConflict, ContextError, UnknownLayer
from ._layers import project
from ._layout import Layout
from ._locking import locked
from ._provider import provider_layer
from ._records import CompactionRecord
from ._tier import TierContext
from ._view import TURN_KINDS, Unit, View

if TYPE_CHECKING:
    from ._commit import SessionWriter
    from ._persistence import _Frame
    from ._rendered import Rendered
    from ._storage import ContextStorage


class LayerOperations:
    """Manual layer operations of :class:`~context.ContextEngine`."""

    if TYPE_CHECKING:
        from graph import GraphReader

        from ._layers import LayerBook

        graph: GraphReader
        book: LayerBook
        lock: threading.RLock
        clock: Callable[[], datetime]

        def context(
            self, head: str | None = None, frame: str | None = None, *, preview: bool = False
        ) -> tuple[TierContext, View, _Frame]: ...

        def preview(self, head: str | None = None, frame: str | None = None) -> Rendered: ...

        def prepare(self, view: View, ctx: TierContext) -> View: ...

        def _commit(self, decision: Decision, rendered: Any = None) -> list[str]: ...

        def _forget(self, decision: Decision) -> None: ...

        def _notify(self, records: list[CompactionRecord]) -> None: ...

        def catch_up(self) -> None: ...

        writer: SessionWriter | None
        storage: ContextStorage | None
        _records: list[CompactionRecord]

    def layers(self, *, active: bool | None = None) -> list[LayerInfo]:
        """This session's layers (collapses, compactions), oldest first."""
        found = [*self.graph.layers(), *self.book.overlay.values()]
        return found if active is None else [i for i in found if i.active == active]

    def layer(self, layer_id: str) -> LayerInfo:
        """One layer by id; an unknown one raises :class:`~context.UnknownLayer`."""
        return self.book.get(layer_id)

    @locked
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
        self.catch_up()
        ctx, view, state = self.context(head, frame)
        units = list(view.units)
        first, last = _index_of(units, from_node), _index_of(units, to_node)
        if first == last and units[first].kind == "layer":  # inside one layer: refine it
            return self._refine(from_node, to_node, head, frame)
        if first > last:
            first, last = last, first
        covered = units[first : last + 1]
        _collapsible(covered)
        ctx.tier = "collapse"
        after, error = collapse_segment(view, ctx, covered, reason="manual", force=True)
        self._settle(Decision(ctx, after, state, frame, [], 0), "collapse")
        if error is not None:
            raise ContextError(f"collapse failed: {error}")
        return self.book.get(str(ctx.records[-1].details["layer"]))

    def _refine(
        self, from_node: str, to_node: str, head: str | None, frame: str | None
    ) -> LayerInfo:
        """A manual collapse inside a layer's span (a compaction, a collapse): a finer
        layer over the rounds it covers, which shows there in the coarse layer's place
        (the coarse one shows once, at its first unit left); rolling it back restores the
        coarse prompt. Built on the walked units, never on a checkpoint's placeholders."""
        ctx, view, state = self.context(head, frame)
        raw = list(ctx.units)
        first, last = sorted((_index_of(raw, from_node), _index_of(raw, to_node)))
        covered = raw[first : last + 1]
        if any(not unit.items for unit in covered):  # placeholders of a checkpointed span
            state.layout = Layout()
            ctx, view, state = self.context(head, frame)
            raw = list(ctx.units)
            first, last = sorted((_index_of(raw, from_node), _index_of(raw, to_node)))
            covered = raw[first : last + 1]
        _collapsible(covered)
        ctx.tier = "collapse"
        walked = View(tuple(raw), view.extra_tokens)
        _, error = collapse_segment(walked, ctx, covered, reason="manual", force=True)
        after = project(walked, ctx, self.book.active()) if error is None else view
        self._settle(Decision(ctx, after, state, frame, [], 0), "collapse")
        if error is not None:
            raise ContextError(f"collapse failed: {error}")
        return self.book.get(str(ctx.records[-1].details["layer"]))

    @locked
    def compact(
        self, focus: str | None = None, *, head: str | None = None, frame: str | None = None
    ) -> LayerInfo:
        """``/compact [focus]``: one compaction of all but the newest rounds, now."""
        self.catch_up()
        ctx, view, state = self.context(head, frame)
        view = self.prepare(view, ctx)
        try:
            after, info = compact_now(view, ctx, focus)
        except ContextError:
            self._settle(Decision(ctx, view, state, frame, [], 0), "compaction")
            raise
        self._settle(Decision(ctx, after, state, frame, [], 0), "compaction")
        return self.graph.layer(info.id) if self.writer is not None else info

    @locked
    def provider_compaction(
        self,
        items: list[dict[str, Any]],
        *,
        head: str | None = None,
        frame: str | None = None,
        provider: str = "anthropic",
    ) -> LayerInfo | None:
        """Keep what a provider's own compaction returned (``items``) as a layer over the
        units of the prompt rendered from ``head`` — the prompt it compacted."""
        self.catch_up()
        ctx, view, state = self.context(head, frame)
        ctx.tier = "provider"
        after, info = provider_layer(ctx, view, items, provider)
        self._settle(Decision(ctx, after, state, frame, [], 0), "provider compaction")
        if info is None or self.writer is None:
            return info
        return self.graph.layer(info.id)

    @locked
    def rollback(self, layer_id: str, reason: str | None = None) -> list[LayerInfo]:
        """Roll back a layer and every layer built on it; the covered messages show again,
        exactly as before the layer was made."""
        self.catch_up()
        info = self.book.get(layer_id)
        started = time.perf_counter()
        before = self.preview().tokens  # what the rollback costs the next prompt, recorded
        if layer_id in self.book.overlay:
            done = self.book.rollback(layer_id)
            after = self.preview().tokens
            record = _rollback_record(
                self.graph.session, self.clock(), info, done, reason, started, before, after
            )
            self._records.append(record)
            self._notify([record])
            return done
        writer, storage = self.writer, self.storage
        if writer is None:
            raise ContextError(f"this graph is read-only; layer {layer_id} cannot roll back")
        try:
            with writer.batch():
                done = writer.rollback_layer(layer_id, reason)
                after = self.preview().tokens  # the rollback shows in this transaction
                record = _rollback_record(
                    self.graph.session, self.clock(), info, done, reason, started, before, after
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
        self._notify([record])
        return done

    def _settle(self, decision: Decision, what: str) -> None:
        """Commit what a manual operation decided; a conflict with another writer's layer
        is refused with :class:`CommitConflict` (a person asked for this one layer)."""
        try:
            self._commit(decision)
        except Redo as conflict:
            self._forget(decision)
            self.catch_up()
            cause = conflict.__cause__ or conflict
            raise CommitConflict(f"{what} refused: {conflict}") from cause

    @locked
    def expand(self, layer_or_node: str, *, depth: int = 1) -> list[dict[str, Any]]:
        """The original messages under a layer, or a finished function's own messages as
        they were shown inside it while it ran (``depth`` > 1 opens nested functions)."""
        if layer_or_node in self.graph and self.graph.get(layer_or_node).kind == "function":
            try:
                return steps_to_messages(inside(self.graph.state, layer_or_node, depth))
            except GraphError as error:
                raise ContextError(str(error)) from error
        info = self.book.get(layer_or_node)
        return steps_to_messages(_covered_steps(self, info))


def _rollback_record(
    session: str,
    now: datetime,
    info: LayerInfo,
    done: list[LayerInfo],
    reason: str | None,
    started: float,
    before: int,
    after: int,
) -> CompactionRecord:
    return CompactionRecord(
        id=new_id(),
        session=session,
        timestamp=now.isoformat(),
        tier="rollback",
        tokens_before=before,
        tokens_after=after,
        ratio=round(after / before, 4) if before else 1.0,
        messages_before=0,
        messages_after=0,
        summarized=0,
        preserved=len(info.covers),
        duration_ms=round((time.perf_counter() - started) * 1000, 3),
        details={"layers": [i.id for i in done], "reason": reason, "kind": info.kind},
    )


def _index_of(units: list[Unit], node_id: str) -> int:
    for index, unit in enumerate(units):
        if node_id in unit.node_ids:
            return index
    raise UnknownLayer(f"node {node_id!r} is not in the rendered conversation")


def _covered_steps(ops: LayerOperations, info: LayerInfo) -> list[Step]:
    graph = ops.graph
    steps: list[Step] = []
    covered = set(info.covers)
    for node_id in info.covers:
        if node_id not in graph:
            continue
        node = graph.get(node_id)
        if node.kind == "dialogue":
            steps.append(Step(node, "message", 0, False))
            steps.extend(Step(t, "tool", 0, False) for t in graph.tools(node_id) if t.id in covered)
        elif node.kind == "function":
            steps.append(Step(node, "call", 0, False))
    return steps


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
