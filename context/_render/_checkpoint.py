"""A layout checkpoint: a fresh engine starts from persisted state, not a full walk.

In a long session most of the history lies under one layer (a compaction over tens of
thousands of rounds); a new engine used to walk, group and build all of those units only to
show the layer in their place. The checkpoint, saved with the tier state, names that span:
the layer, its unit and step range and the chain nodes around it, and the graph position it
was taken at. A fresh :class:`~context._render._layout.Layout` then walks only the part before the
span and the part after it, and stands a placeholder (node ids, no items) in for each unit
under the layer, which the projection hides again exactly as before.

The checkpoint is only trusted when nothing could have changed under it: the layer is still
active, the record it was taken at is still there (a truncated graph has another), and every
record since is a node of the walk after the span, a result or finish of one, or a layer or
rollback event (a layer on this walk nests with the span's layer: one inside it refines it
and shows over the placeholders from its replacement; rolling back the span's layer or one
it builds on makes it inactive; a render that would still show a placeholder walks again).
A node elsewhere (another branch, a tool added under the span), a fork or a fork-off head:
the layout walks in full.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, cast

import msgspec

from graph import (
    Event,
    Finish,
    GraphState,
    Layer,
    LayerInfo,
    Node,
    Rollback,
    Step,
    Tool,
    ToolResult,
)

from .._view import TURN_KINDS, RawUnit, Unit, View


class WalkedLayout(Protocol):
    """What :func:`capture` reads of a layout's last walk (``_layout.Layout`` has it)."""

    head: str | None
    shape: tuple[tuple[str, bool], ...] | None
    hidden: Checkpoint | None
    steps: list[Step]
    raw: list[RawUnit]
    built: list[Unit | None]
    watch: dict[str, int]

    def tools_between(
        self, first: int, end: int, category: Callable[[str], str | None]
    ) -> tuple[list[str], set[str]]: ...


MIN_HIDDEN = 256
"""Spans of fewer units are walked as usual (a checkpoint would save little)."""


class Checkpoint(msgspec.Struct, frozen=True):
    """Where the span under ``layer`` lies in the walk and the graph it was seen in."""

    layer: str
    units: tuple[int, int]
    """First unit under the layer and the one just after it."""
    steps: tuple[int, int]
    before: str
    """The chain node just before the span (the walk up to it is the prefix)."""
    last: str
    """The chain node that ends the span (the walk after it is the rest)."""
    after: str
    """The first node after the span."""
    seq: int
    record: str
    """Id of the record at ``seq`` (a graph truncated and appended again has another)."""
    sizes: list[tuple[str, int, int]]
    """Runs of (unit kind, node ids per unit, units) under the layer."""


def _record_at(state: GraphState, seq: int) -> Node | Event | None:
    records = state.records
    index = bisect.bisect_left(records, seq, key=_seq)
    if index < len(records) and _seq(records[index]) == seq:
        record = records[index]
        return record if isinstance(record, Event) else record[0]
    return None


def _seq(record: object) -> int:
    if isinstance(record, Event):
        return record.seq
    node = record[0]  # type: ignore[index]
    seq: int = node.seq
    return seq


def _record_id(record: Node | Event) -> str:
    return record.node_id if isinstance(record, Event) else record.id


def unit_runs(units: Iterable[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """``(kind, node ids)`` per unit as runs of ``(kind, node ids per unit, units)``."""
    runs: list[tuple[str, int, int]] = []
    for kind, size in units:
        if runs and runs[-1][:2] == (kind, size):
            runs[-1] = (kind, size, runs[-1][2] + 1)
        else:
            runs.append((kind, size, 1))
    return runs


def sealed(
    state: GraphState,
    layer: str,
    units: tuple[int, int],
    steps: tuple[int, int],
    around: tuple[str, str, str],
    sizes: list[tuple[str, int, int]],
) -> Checkpoint | None:
    """The checkpoint of a span, taken at the graph's newest record; ``around`` is the node
    before the span, its last and the first after it. None for a graph with no record."""
    record = _record_at(state, state.last_seq)
    if record is None:
        return None
    before, last, after = around
    return Checkpoint(
        layer=layer,
        units=units,
        steps=steps,
        before=before,
        last=last,
        after=after,
        seq=state.last_seq,
        record=_record_id(record),
        sizes=sizes,
    )


def layer_of(
    state: GraphState, layer_id: str, pending: Mapping[str, LayerInfo] | None
) -> LayerInfo | None:
    """A stored layer, or one ``pending`` (decided by a render, committed with it)."""
    found = state.layers.get(layer_id)
    return found if found is not None or pending is None else pending.get(layer_id)


def hidden_tools(
    node_ids: Sequence[str], state: GraphState, category: Callable[[str], str | None]
) -> tuple[list[str], set[str]]:
    """What ``unit_tools`` finds in built units, from the nodes alone: compactable tool
    outputs in order and the other tool names (only tool nodes carry a tool name)."""
    compactable: list[str] = []
    others: set[str] = set()
    nodes = state.nodes
    for node_id in node_ids:
        payload = nodes[node_id].payload
        if type(payload) is not Tool or payload.name is None:
            continue
        if category(payload.name) is None:
            others.add(payload.name)
        else:
            compactable.append(node_id)
    return compactable, others


def capture(
    layout: WalkedLayout,
    view: View,
    state: GraphState,
    category: Callable[[str], str | None],
    pending: Mapping[str, LayerInfo] | None = None,
) -> Checkpoint | None:
    """A checkpoint of ``layout`` for the projected ``view``, or None when no layer hides
    a span it could be trusted for; ``pending`` layers (the render's own, committed with
    the checkpoint) count as stored."""
    if layout.head is None or layout.shape != () or layout.hidden is not None:
        return None
    shown = [u for u in view.units if u.layer is not None and u.count >= MIN_HIDDEN]
    if not shown:
        return None
    top = max(shown, key=lambda u: u.count)
    first, end = top.position, top.position + top.count
    raw, steps, built = layout.raw, layout.steps, layout.built
    info = state.layers.get(top.layer or "") or (pending or {}).get(top.layer or "")
    if info is None or not info.active or first < 1 or end >= len(raw):
        return None
    begin, stop = raw[first].start, raw[end - 1].end
    if raw[first - 1].end != begin or raw[end].start != stop:
        return None
    if any(n in layout.watch for n in info.covers):
        return None
    for step in steps[begin:stop]:
        if step.depth or step.running or step.view == "enter":
            return None
    for step in (steps[begin], steps[stop]):
        if step.depth or step.view not in ("message", "call"):
            return None
    covered: list[str] = []
    for unit in built[first:end]:
        if unit is None or unit.kind not in TURN_KINDS or unit.pinned or unit.running:
            return None
        if unit.count != 1 or unit.layer is not None:
            return None
        covered.extend(unit.node_ids)
    spanned = cast(list[Unit], built[first:end])  # each checked above
    sizes = unit_runs((unit.kind, len(unit.node_ids)) for unit in spanned)
    if tuple(covered) != info.covers:
        return None
    inside = set(covered)
    tools = state.tools
    if any(t not in inside for n in covered for t in tools.get(n, ())):
        return None  # a tool the graph has under the span that this walk has not seen
    found, others = layout.tools_between(first, end, category)
    if (found, others) != hidden_tools(covered, state, category):
        return None
    prev = state.prev
    before, last = prev.get(steps[begin].node.id), prev.get(steps[stop].node.id)
    if before is None or last is None:
        return None
    around = (before, last, steps[stop].node.id)
    return sealed(state, info.id, (first, end), (begin, stop), around, sizes)


def placeholders(saved: Checkpoint, covers: Sequence[str]) -> list[Unit] | None:
    """The units under the layer as the projection needs them: positions and node ids."""
    units: list[Unit] = []
    position, offset = saved.units[0], 0
    for kind, size, count in saved.sizes:
        if kind not in TURN_KINDS or size < 1:
            return None
        for _ in range(count):
            ids = tuple(covers[offset : offset + size])
            units.append(Unit((), kind, position, node_ids=ids))
            position += 1
            offset += size
    if offset != len(covers) or position != saved.units[1]:
        return None
    return units


def trusted(
    saved: Checkpoint,
    state: GraphState,
    head: str,
    pending: Mapping[str, LayerInfo] | None = None,
) -> bool:
    """Whether nothing the checkpoint relies on changed (cheap checks, no walk); its layer
    may be ``pending`` (decided by this render, committed with it)."""
    info = layer_of(state, saved.layer, pending)
    if info is None or not info.active:
        return False
    record = _record_at(state, saved.seq)
    if record is None or _record_id(record) != saved.record:
        return False
    nodes, prev = state.nodes, state.prev
    if any(n not in nodes for n in (saved.before, saved.last, saved.after, head)):
        return False
    if prev.get(saved.after) != saved.last or prev.get(info.covers[0]) != saved.before:
        return False
    return not state.ancestry(head)


def newer_outside(saved: Checkpoint, state: GraphState, walked: Sequence[Step]) -> bool:
    """Whether a record newer than the checkpoint may have changed the span: anything but
    a layer event or a node of ``walked`` (the walk after the span) or an event on one."""
    records = state.records
    index = bisect.bisect_right(records, saved.seq, key=_seq)
    if index >= len(records):
        return False
    seen = {step.node.id for step in walked}
    for record in records[index:]:
        if isinstance(record, Event):
            if isinstance(record.data, Layer | Rollback):
                continue
            if isinstance(record.data, ToolResult | Finish) and record.node_id in seen:
                continue
            return True
        if record[0].id not in seen:
            return True
    return False
