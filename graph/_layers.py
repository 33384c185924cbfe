"""Layers: projections over stored nodes, made and rolled back as sequenced facts.

A layer says "show this replacement where these nodes were" (``context`` uses them for
collapsed segments and compactions). Making one and rolling one back are events, so
``g.at(seq)`` shows exactly which layers applied at any point and nothing is deleted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from ._branches import BRANCHES
from ._codec import normalize_event, normalize_meta, normalize_time
from ._cursor import Commit, Cursor
from ._errors import (
    InvalidMessage,
    LayerConflict,
    LayerError,
    LayerHandleTaken,
    LayerNotFound,
    LayerRolledBack,
    NodeNotFound,
)
from ._handles import HANDLE_KEY, LAYER_HANDLE, layer_handle
from ._ids import is_safe_id, new_id
from ._nodes import Event, Layer, LayerInfo, Node, Rollback
from ._reader import GraphReader
from ._store import Store


class LayerWriter:
    """Makes and rolls back the layers of one live graph: it reads through ``reader`` (the
    graph), checks under the session's row lock in ``store`` after ``refresh``, and writes
    inside ``batch`` through ``commit`` at the shared ``cursor``'s head."""

    def __init__(
        self,
        reader: GraphReader,
        store: Store,
        cursor: Cursor,
        lock: threading.RLock,
        refresh: Callable[[], None],
        batch: Callable[[], AbstractContextManager[None]],
        commit: Commit,
    ) -> None:
        self._reader = reader
        self._state = reader.state
        self._store = store
        self._cursor = cursor
        self._lock = lock
        self._refresh = refresh
        self._batch = batch
        self._commit = commit

    def add_layer(
        self,
        kind: str,
        covers: list[str] | tuple[str, ...],
        replacement: Any = None,
        *,
        builds_on: list[str] | tuple[str, ...] = (),
        meta: dict[str, Any] | None = None,
        at: Any = None,
        layer_id: str | None = None,
    ) -> LayerInfo:
        if not isinstance(kind, str) or not kind:
            raise InvalidMessage("kind", "a layer needs a non-empty string kind")
        covered = tuple(dict.fromkeys(covers))
        if not covered or not all(isinstance(c, str) for c in covered):
            raise InvalidMessage("covers", "a layer must cover at least one node id")
        when = normalize_time(at)
        meta_value = normalize_meta(meta)
        if layer_id is not None and not is_safe_id(layer_id):
            raise InvalidMessage("layer_id", f"{layer_id!r} is not a safe id ([A-Za-z0-9_.-])")
        session = self._state.session
        with self._lock, self._batch():
            self.lock()
            if layer_id is not None and (
                layer_id in self._state.layers or layer_id in self._state.nodes
            ):
                raise LayerError(f"id {layer_id!r} is already used in session {session!r}")
            missing = [n for n in covered if n not in self._state.nodes]
            if missing:
                raise NodeNotFound(missing[0], session)
            self._handle_free(meta_value)
            built = self._nesting(covered, builds_on)
            data = Layer(
                kind=kind,
                covers=covered,
                replacement=replacement,
                builds_on=tuple(built),
                meta=meta_value,
            )
            event = Event(
                session=session,
                seq=0,
                node_id=layer_id or new_id(),
                at=when,
                data=normalize_event(data),
            )
            self._commit([event], [], self._cursor.head)
            return self._state.layers[event.node_id]

    def _handle_free(self, meta: dict[str, Any]) -> None:
        """Refuses a handle another layer of the session holds (read under the lock, so a
        writer that picked it from an older view is told here, before anything is written)."""
        handle = meta.get(HANDLE_KEY)
        if not isinstance(handle, str) or not LAYER_HANDLE.fullmatch(handle):
            return
        for info in self._state.layers.values():
            if layer_handle(info) == handle:
                raise LayerHandleTaken(
                    f"handle {handle} is already held by layer {info.id} in session "
                    f"{self._state.session!r}; next_layer_handle(graph.layers()) is free"
                )

    def lock(self) -> None:
        self._store.lock_session(self._state.session)
        self._refresh()

    def _nesting(self, covered: tuple[str, ...], builds_on: Any) -> list[str]:
        """The active layers a new layer over ``covered`` builds on (those wholly inside
        it); raises :class:`LayerConflict` for one it overlaps only in part where one walk
        could show both. A layer wholly containing ``covered`` is refined, not built on."""
        inside = set(covered)
        built = list(dict.fromkeys(builds_on))
        for built_id in built:
            info = self._reader.layer(built_id)
            if not info.active:
                raise LayerError(f"layer {built_id} was rolled back; it cannot be built on")
            if not set(info.covers) <= inside:
                raise LayerError(f"layer {built_id} covers nodes outside the new layer")
        for info in self._state.layers.values():
            if not info.active or info.id in built:
                continue
            overlap = inside.intersection(info.covers)
            if not overlap or overlap == inside:  # apart, or a refinement of ``info``
                continue
            if overlap == set(info.covers):
                built.append(info.id)
            elif self._blocks(inside, info.covers):
                raise LayerConflict(
                    f"the new layer overlaps layer {info.id} only in part "
                    f"(node {sorted(overlap)[0]}); layers on one branch must nest"
                )
        return built

    def _blocks(self, covered: set[str], other: tuple[str, ...]) -> bool:
        """Whether ``other`` (overlapping ``covered`` in part) applies on every branch whose
        walk holds ``covered``: a layer applies to a branch only where the branch holds all
        its nodes, so on a fork that lacks some of ``other``'s nodes the new layer is free
        (where both apply, the older one shows and the newer neither shows nor blocks)."""
        state = self._state
        if not state.one_walk(covered.union(other)):
            return False  # no walk holds both
        mine = {state.top(n) for n in covered}
        theirs = {state.top(n) for n in other}
        heads = {*state.tips(), *self._store.get_values(state.session, BRANCHES).values()}
        if self._cursor.head is not None:
            heads.add(self._cursor.head)
        for head in heads:
            if head in state.nodes:
                chain = set(state.chain(state.top(head)))
                if mine <= chain and not theirs <= chain:
                    return False
        return True

    def rollback_layer(self, layer_id: str, reason: str | None = None) -> list[LayerInfo]:
        session = self._state.session
        session = self._state.session
        with self._lock, self._batch():
            self.lock()
            if layer_id not in self._state.layers:
                other = self._store.session_of(layer_id)
                raise LayerNotFound(layer_id, session, other)
            info = self._state.layers[layer_id]
            if not info.active:
                raise LayerRolledBack(layer_id, info.rolled_back)
            doomed = [layer_id]
            for candidate in self._state.layers.values():
                if candidate.active and any(b in doomed for b in candidate.builds_on):
                    doomed.append(candidate.id)
            when = normalize_time(None)
            events: list[Node | Event] = [
                Event(session=session, seq=0, node_id=d, at=when, data=Rollback(reason=reason))
                for d in reversed(doomed)
            ]
            self._commit(events, [], self._cursor.head)
            return [self._state.layers[d] for d in reversed(doomed)]
