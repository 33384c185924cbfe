"""``LayerBook``: the layers a render may use, the stored ones and those not stored yet."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec

from graph import (
    LAYER_HANDLE,
    ChatMessage,
    GraphReader,
    Layer,
    LayerInfo,
    Step,
    layer_handle,
    new_id,
    next_layer_handle,
    resolve_ref,
    steps_to_messages,
)

from .._budget._names import LayerKind
from .._budget._tokens import TokenCounter
from .._errors import UnknownLayer

LAYER_TOTALS = "covered"
"""The layer meta key of its originals' totals, kept when the layer is made (a reader
shows them without expanding and counting every covered message):
``{"tokens": int, "messages": int, "encoding": str, "as_sent": bool}``, the tokens as
``counter`` counted them (its encoding, and whether as sent)."""


def covered_steps(graph: GraphReader, covers: Sequence[str]) -> list[Step]:
    """The steps of a layer's originals: each covered message or function call, an
    assistant's covered tool results after it."""
    steps: list[Step] = []
    covered = set(covers)
    for node_id in covers:
        if node_id not in graph:
            continue
        node = graph.get(node_id)
        if node.kind == "dialogue":
            steps.append(Step(node, "message", 0, False))
            steps.extend(Step(t, "tool", 0, False) for t in graph.tools(node_id) if t.id in covered)
        elif node.kind == "function":
            steps.append(Step(node, "call", 0, False))
    return steps


def covered_totals(
    graph: GraphReader, covers: Sequence[str], counter: TokenCounter
) -> dict[str, Any]:
    """A layer's :data:`LAYER_TOTALS` meta: its originals' messages and tokens in full."""
    messages = steps_to_messages(covered_steps(graph, covers))
    return {
        "tokens": counter.count_messages(messages),
        "messages": len(messages),
        "encoding": counter.encoding_name,
        "as_sent": counter.as_sent,
    }


class LayerBook:
    """The layers a render may use: the graph's own, plus the layers renders decided on
    that are not stored (yet): pending until the engine commits them, or kept in memory
    for good on a read-only graph."""

    def __init__(
        self,
        graph: GraphReader,
        refresh: Callable[[], None] | None = None,
        session_of: Callable[[str], str | None] | None = None,
    ) -> None:
        self.graph = graph
        self.refresh = refresh
        """Reads what other writers stored (a layer made elsewhere is found after it)."""
        self.session_of = session_of
        self.overlay: dict[str, LayerInfo] = {}

    def draft(self) -> LayerBook:
        """A book over the same graph that starts with this one's pending layers and
        keeps what is added to it to itself (what a preview decides is never stored)."""
        draft = LayerBook(self.graph, self.refresh, self.session_of)
        draft.overlay = dict(self.overlay)
        return draft

    def active(self) -> list[LayerInfo]:
        found = [i for i in self.graph.layers() if i.active and i.id not in self.overlay]
        return [*found, *(i for i in self.overlay.values() if i.active)]

    def next_handle(self) -> str:
        """The handle the next layer of this session gets (``L<k>``, see ``graph``)."""
        stored = self.graph.layers()
        known = {info.id for info in stored}
        pending = [i for i in self.overlay.values() if i.id not in known]
        return next_layer_handle([*stored, *pending])

    def _by_handle(self, handle: str) -> str:
        """The id of the layer ``handle`` names (``handle`` itself when none does)."""
        pending = (i.id for i in self.overlay.values() if layer_handle(i) == handle)
        return next(pending, None) or resolve_ref(self.graph.state, handle) or handle

    def get(self, layer_id: str) -> LayerInfo:
        """A layer by its id or its handle (``L3``)."""
        info = self.overlay.get(layer_id)
        if info is not None:
            return info
        for attempt in range(2):
            found = self._by_handle(layer_id) if LAYER_HANDLE.fullmatch(layer_id) else layer_id
            info = self.overlay.get(found)
            if info is not None:
                return info
            try:
                return self.graph.layer(found)
            except KeyError:
                if attempt or self.refresh is None:
                    break
                self.refresh()
        other = self.session_of(layer_id) if self.session_of is not None else None
        if other is not None and other != self.graph.session:
            raise UnknownLayer(
                f"layer {layer_id!r} is not in session {self.graph.session!r}: "
                f"it belongs to session {other!r}"
            )
        raise UnknownLayer(
            f"no layer {layer_id!r} in session {self.graph.session!r}; engine.layers() lists them"
        )

    def add(
        self,
        kind: LayerKind,
        covers: list[str],
        replacement: list[ChatMessage],
        meta: dict[str, Any],
        *,
        layer_id: str | None = None,
    ) -> LayerInfo:
        """A new layer, in memory until the engine commits the render that made it."""
        inside = set(covers)
        built = tuple(
            i.id
            for i in self.active()  # the ends first: most layers are nowhere near
            if not i.covers or (i.covers[0] in inside and i.covers[-1] in inside)
            if inside.issuperset(i.covers)
        )
        layer = Layer(kind, tuple(covers), replacement, built, meta)
        # as the store gives it back (keys sorted), so the prompt is what a reader will see
        stored = msgspec.json.encode(layer, order="deterministic")
        layer = msgspec.json.decode(stored, type=Layer)
        info = LayerInfo(
            layer_id or new_id(), self.graph.session, self.graph.last_seq, datetime.now(UTC), layer
        )
        self.overlay[info.id] = info
        return info

    def pending(self) -> list[LayerInfo]:
        """The layers decided on and not stored, oldest first."""
        return list(self.overlay.values())

    def settle(self, layer_ids: Iterable[str]) -> None:
        """Forget these in-memory layers: stored now, or dropped with their render."""
        for layer_id in layer_ids:
            self.overlay.pop(layer_id, None)

    def rollback(self, layer_id: str) -> list[LayerInfo]:
        """Roll back an in-memory layer (and those built on it)."""
        doomed = [layer_id]
        for info in self.overlay.values():
            if info.active and any(b in doomed for b in info.builds_on):
                doomed.append(info.id)
        for doomed_id in doomed:
            old = self.overlay[doomed_id]
            self.overlay[doomed_id] = msgspec.structs.replace(old, rolled_back=old.seq)
        return [self.overlay[d] for d in reversed(doomed)]
