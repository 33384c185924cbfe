"""What a person (or the model, through tools) does to layers: collapse a range by hand,
compact now, roll a layer back, read what a layer or a finished function hides.

Every operation is a graph fact with a record, so a replay shows it at its turn.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from graph import (
    GraphError,
    LayerError,
    LayerInfo,
    LayerNotFound,
    Step,
    inside,
    new_id,
    steps_to_messages,
)

from ._collapse import collapse_segment
from ._compact import compact_now
from ._errors import ContextError, UnknownLayer
from ._locking import locked
from ._provider import provider_layer
from ._records import CompactionRecord
from ._tier import TierContext
from ._view import Unit, View

if TYPE_CHECKING:
    from ._engine import Rendered
    from ._persistence import _Frame


class LayerOperations:
    """Manual layer operations of :class:`~context.ContextEngine`."""

    if TYPE_CHECKING:
        from graph import GraphReader

        from ._layers import LayerBook

        graph: GraphReader
        book: LayerBook
        lock: threading.RLock

        def context(
            self, head: str | None = None, frame: str | None = None, *, preview: bool = False
        ) -> tuple[TierContext, View, _Frame]: ...

        def preview(self, head: str | None = None, frame: str | None = None) -> Rendered: ...

        def prepare(self, view: View, ctx: TierContext) -> View: ...

        def _persist(self, ctx: TierContext, frame: _Frame, key: str | None) -> list[str]: ...

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
        ctx, view, state = self.context(head, frame)
        units = list(view.units)
        first, last = _index_of(units, from_node), _index_of(units, to_node)
        if first > last:
            first, last = last, first
        covered = units[first : last + 1]
        for unit in covered:
            if unit.pinned or unit.running or unit.kind not in ("round", "call", "layer"):
                where = f"node {unit.node_ids[0] if unit.node_ids else '?'}"
                what = "the system prompt or the task" if unit.pinned else f"a {unit.kind}"
                if unit.running:
                    what = "a running function"
                elif unit.kind == "layer":
                    what, where = "a compaction", f"layer {unit.layer}"
                raise ContextError(
                    f"cannot collapse {what} ({where}); pick rounds or finished functions"
                )
        ctx.tier = "collapse"
        try:
            _, error = collapse_segment(view, ctx, covered, reason="manual", force=True)
        except LayerError as refused:  # e.g. a layer the range only partly holds
            raise ContextError(f"collapse refused: {refused}") from refused
        finally:
            self._persist(ctx, state, frame)
        if error is not None:
            raise ContextError(f"collapse failed: {error}")
        return self.book.get(str(ctx.records[-1].details["layer"]))

    @locked
    def compact(
        self, focus: str | None = None, *, head: str | None = None, frame: str | None = None
    ) -> LayerInfo:
        """``/compact [focus]``: one compaction of all but the newest rounds, now."""
        ctx, view, state = self.context(head, frame)
        view = self.prepare(view, ctx)
        try:
            _, info = compact_now(view, ctx, focus)
        except LayerError as refused:
            raise ContextError(f"compaction refused: {refused}") from refused
        finally:
            self._persist(ctx, state, frame)
        return info

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
        ctx, view, state = self.context(head, frame)
        ctx.tier = "provider"
        _, info = provider_layer(ctx, view, items, provider)
        self._persist(ctx, state, frame)
        return info

    @locked
    def rollback(self, layer_id: str, reason: str | None = None) -> list[LayerInfo]:
        """Roll back a layer and every layer built on it; the covered messages show again,
        exactly as before the layer was made."""
        info = self.book.get(layer_id)
        started = time.perf_counter()
        before = self.preview().tokens  # what the rollback costs the next prompt, recorded
        if layer_id in self.book.overlay:
            done = self.book.rollback(layer_id)
        else:
            writer: Any = self.graph
            if not hasattr(writer, "rollback_layer"):
                raise ContextError(f"this graph is read-only; layer {layer_id} cannot roll back")
            try:
                done = writer.rollback_layer(layer_id, reason)
            except LayerNotFound as error:
                raise UnknownLayer(str(error)) from error
            except LayerError as error:
                raise ContextError(str(error)) from error
        after = self.preview().tokens
        ctx, _, state = self.context()
        ctx.records.append(
            CompactionRecord(
                id=new_id(),
                session=self.graph.session,
                timestamp=ctx.now.isoformat(),
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
        )
        self._persist(ctx, state, None)
        return done

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
