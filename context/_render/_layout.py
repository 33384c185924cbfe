"""The walk grouped into units, kept between renders and extended, not redone.

A render's first step is walking the graph from the head and grouping what it sees into
units. For a live agent the head only moves forward, so ``Layout`` keeps the last walk and
extends it from the old head: the cost of a render no longer grows with the history. Tool
results and function finishes that arrive later are caught by watching the nodes whose
state can still change; anything else (a fork, another frame) walks again in full.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import cast

from graph import (
    ChatMessage,
    Dialogue,
    GraphState,
    LayerInfo,
    Node,
    Step,
    dialogue_message,
    function_messages,
    tool_call,
    tool_result_message,
    visible,
    visible_since,
)

from .._view import RawUnit, Unit, UnitKind, is_native_compaction, unit_tools
from ._checkpoint import (
    Checkpoint,
    hidden_tools,
    layer_of,
    newer_outside,
    placeholders,
    trusted,
)

Entry = tuple[ChatMessage, Node | None]


class Grouper:
    """Feeds walk steps in order and closes units: system, task, round, call."""

    def __init__(self, task_seen: bool = False) -> None:
        self.units: list[RawUnit] = []
        self.task_seen = task_seen
        self._users: list[Entry] = []
        self._users_start = 0
        self._users_running = False
        self._users_task = task_seen
        self._round: list[Entry] | None = None
        self._round_start = 0
        self._round_task = task_seen
        self._round_running = False
        self._assistant = cast("ChatMessage", {})
        self._end = 0

    def _close_round(self) -> None:
        if self._round is not None:
            self.units.append(
                RawUnit(
                    "round",
                    tuple(self._round),
                    self._round_running,
                    start=self._round_start,
                    end=self._end,
                    task_before=self._round_task,
                )
            )
            self._round = None

    def _flush_users(self) -> None:
        if self._users:
            self.units.append(
                RawUnit(
                    "round",
                    tuple(self._users),
                    self._users_running,
                    start=self._users_start,
                    end=self._end,
                    task_before=self._users_task,
                )
            )
            self._users = []
            self._users_running = False

    def _single(self, kind: UnitKind, entries: tuple[Entry, ...], step: Step, index: int) -> None:
        self._close_round()
        self._flush_users()
        pinned = kind == "system" or kind == "task"
        self.units.append(
            RawUnit(
                kind,
                entries,
                step.running,
                pinned=pinned,
                start=index,
                end=index + 1,
                task_before=self.task_seen,
            )
        )

    def feed(self, index: int, step: Step) -> None:
        node = step.node
        if step.view == "enter":
            self._close_round()
            self._flush_users()
            self.task_seen = False
            self._end = index + 1
            return
        if step.view == "tool":
            if self._round is not None:
                self._assistant.setdefault("tool_calls", []).append(tool_call(node))
                self._round.append((tool_result_message(node), node))
                self._end = index + 1
            return
        if is_native_compaction(node):
            return
        if step.view == "call":
            pair = function_messages(node)
            self._single("call", ((pair[0], node), (pair[1], node)), step, index)
            self._end = index + 1
            return
        payload = node.payload
        assert isinstance(payload, Dialogue)
        message = dialogue_message(node)
        if payload.role == "system":
            self._single("system", ((message, node),), step, index)
        elif payload.role == "user":
            self._close_round()
            if not self.task_seen:
                self._flush_users()
                self._single("task", ((message, node),), step, index)
                self.task_seen = True
            else:
                if not self._users:
                    self._users_start = index
                    self._users_task = self.task_seen
                self._users.append((message, node))
                self._users_running = self._users_running or step.running
        else:
            self._close_round()
            self._assistant = message
            self._round_start = self._users_start if self._users else index
            self._round_task = self._users_task if self._users else self.task_seen
            self._round = [*self._users, (message, node)]
            self._round_running = step.running or self._users_running
            self._users = []
            self._users_running = False
        self._end = index + 1

    def finish(self) -> list[RawUnit]:
        self._close_round()
        self._flush_users()
        return self.units


def group_steps(steps: Sequence[Step]) -> list[RawUnit]:
    """Group a whole walk into units; the first user message of each frame is the task."""
    grouper = Grouper()
    for index, step in enumerate(steps):
        grouper.feed(index, step)
    return grouper.finish()


def _watched(unit: RawUnit) -> list[str]:
    """Nodes of a unit whose state can still change (pending tools, running functions)."""
    ids = []
    for _, node in unit.entries:
        if node is None:
            continue
        if (node.kind == "tool" and node.result is None) or (
            node.kind == "function" and node.finish is None
        ):
            ids.append(node.id)
    return list(dict.fromkeys(ids))


class Layout:
    """One frame's walk, its units, and the built units, extended render by render."""

    def __init__(self) -> None:
        self.head: str | None = None
        self.shape: tuple[tuple[str, bool], ...] | None = None
        self.steps: list[Step] = []
        self.raw: list[RawUnit] = []
        self.built: list[Unit | None] = []
        self.watch: dict[str, int] = {}
        self.rebuilds = 0
        self.rollbacks_seen = 0
        self.first_built = 0
        """Lowest position (re)built by the last ``units`` call (len when none)."""
        self._unbuilt = 0
        """No unit before this position needs building (``units`` starts there)."""
        self.prefix: tuple[int, list[Unit], int] | None = None
        """(boundary, the snipped prefix, units it dropped), reused while nothing before the
        boundary changes."""
        self._compactable: list[str] = []
        self._compactable_at: list[int] = []
        self._kept_tools: set[str] = set()
        self._tools_valid = 0
        self.hidden: Checkpoint | None = None
        """The checkpoint this layout started from: its span holds placeholders (no steps,
        no raw units), which only the checkpoint's layer may show over."""
        self._state: GraphState | None = None

    def _shape(self, state: GraphState, head: str | None) -> tuple[tuple[str, bool], ...]:
        if head is None:
            return ()
        return tuple((f, state.nodes[f].finish is None) for f in state.ancestry(head))

    def update(
        self,
        state: GraphState,
        head: str | None,
        frame: str | None,
        saved: Checkpoint | None = None,
        pending: Mapping[str, LayerInfo] | None = None,
    ) -> None:
        """Bring the layout to ``head``: extend when possible, else start from ``saved`` (a
        checkpoint) when it can be trusted, else walk in full. A layer in ``pending`` (not
        committed yet) counts as stored for the span it hides."""
        if frame is not None and head is None:
            head = state.frame_head(frame)
        shape = self._shape(state, head)
        tail = None
        undone = state.rollbacks != self.rollbacks_seen
        self.rollbacks_seen = state.rollbacks
        if self.hidden is not None:
            info = layer_of(state, self.hidden.layer, pending)
            undone = undone or info is None or not info.active
        if self.head is not None and head is not None and shape == self.shape and not undone:
            tail = visible_since(state, head, self.head)
        restorable = tail is None and frame is None and saved is not None and head is not None
        if restorable and self._restore(state, head, saved, pending):  # type: ignore[arg-type]
            self.head, self.shape = head, shape
            return
        if tail is None:
            self.hidden = None
            steps = visible(state, head, frame)
            self.steps = list(steps)
            self.raw = group_steps(self.steps)
            self.built = [None] * len(self.raw)
            self._unbuilt = 0
            self.watch = {n: i for i, u in enumerate(self.raw) for n in _watched(u)}
            self.rebuilds += 1
            self.prefix = None
            self._kept_tools = set()
            self._tools_valid = 0
        else:
            self._refresh(state)
            if tail:
                self._extend(tail)
        self.head, self.shape = head, shape

    def _restore(
        self,
        state: GraphState,
        head: str,
        saved: Checkpoint,
        pending: Mapping[str, LayerInfo] | None = None,
    ) -> bool:
        """Walk only around the checkpoint's span; False (nothing changed) when it cannot
        be trusted."""
        if not trusted(saved, state, head, pending):
            return False
        first, end = saved.units
        begin, stop = saved.steps
        prefix = visible(state, saved.before)
        rest = visible_since(state, head, saved.last)
        if len(prefix) != begin or not rest or rest[0].node.id != saved.after:
            return False
        if newer_outside(saved, state, rest):
            return False
        info = layer_of(state, saved.layer, pending)
        hidden = None if info is None else placeholders(saved, info.covers)
        grouper = Grouper()
        for index, step in enumerate(prefix):
            grouper.feed(index, step)
        task = grouper.task_seen
        before = grouper.finish()
        if hidden is None or len(before) != first or (before and before[-1].end != begin):
            return False
        grouper = Grouper(task)
        for offset, step in enumerate(rest):
            grouper.feed(stop + offset, step)
        after = grouper.finish()
        if not after or after[0].start != stop:
            return False
        # The span has no steps and no raw units: nothing reads them (nothing in it is
        # watched, and extending starts at the last unit); the placeholders stand in.
        self.steps = cast(list[Step], [*prefix, *([None] * (stop - begin)), *rest])
        self.raw = cast(list[RawUnit], [*before, *([None] * (end - first)), *after])
        self.built = [*([None] * first), *hidden, *([None] * len(after))]
        self._unbuilt = 0
        self.watch = {n: i for i, u in enumerate(before) for n in _watched(u)}
        self.watch.update((n, end + i) for i, u in enumerate(after) for n in _watched(u))
        self.rebuilds += 1
        self.prefix = None
        self._kept_tools = set()
        self._tools_valid = 0
        self.hidden, self._state = saved, state
        return True

    def hide(self, saved: Checkpoint, hidden: list[Unit], state: GraphState) -> None:
        """Stand ``hidden`` (placeholders) in for the walked units under ``saved``'s span, as
        a restored checkpoint does: they are never built (a first render's backlog)."""
        first, end = saved.units
        self.built[first:end] = hidden
        self.hidden, self._state = saved, state

    def _refresh(self, state: GraphState) -> None:
        stale = sorted({i for n, i in self.watch.items() if state.nodes[n] is not self._node(i, n)})
        for index in stale:
            unit = self.raw[index]
            for position in range(unit.start, unit.end):
                step = self.steps[position]
                fresh = state.nodes[step.node.id]
                if fresh is not step.node:
                    self.steps[position] = step._replace(node=fresh)
            grouper = Grouper(unit.task_before)
            for position in range(unit.start, unit.end):
                grouper.feed(position, self.steps[position])
            regrouped = grouper.finish()
            if len(regrouped) != 1:
                raise AssertionError("a unit regrouped into several")
            self.raw[index] = regrouped[0]
            self.built[index] = None
            self._unbuilt = min(self._unbuilt, index)
            for node_id in [n for n, i in self.watch.items() if i == index]:
                del self.watch[node_id]
            for node_id in _watched(regrouped[0]):
                self.watch[node_id] = index

    def _node(self, index: int, node_id: str) -> Node | None:
        for _, node in self.raw[index].entries:
            if node is not None and node.id == node_id:
                return node
        return None

    def _extend(self, tail: list[Step]) -> None:
        last = self.raw[-1] if self.raw else None
        start = last.start if last is not None else 0
        task = last.task_before if last is not None else False
        keep = len(self.raw) - 1 if last is not None else 0
        self.steps.extend(tail)
        grouper = Grouper(task)
        for position in range(start, len(self.steps)):
            grouper.feed(position, self.steps[position])
        fresh = grouper.finish()
        for node_id in [n for n, i in self.watch.items() if i >= keep]:
            del self.watch[node_id]
        self.raw[keep:] = fresh
        self.built[keep:] = [None] * len(fresh)
        self._unbuilt = min(self._unbuilt, keep)
        for offset, unit in enumerate(fresh):
            for node_id in _watched(unit):
                self.watch[node_id] = keep + offset

    def unbuilt(self) -> Iterator[RawUnit]:
        """The raw units the next ``units`` call builds."""
        built, raw = self.built, self.raw
        return (raw[i] for i in range(self._unbuilt, len(raw)) if built[i] is None)

    def units(self, build: Callable[[RawUnit, int], Unit]) -> list[Unit]:
        """The built units, building only those that are new or changed (the loop starts at
        the first that may be: a long history costs one list copy, not a pass)."""
        first = len(self.raw)
        for position in range(self._unbuilt, len(self.raw)):
            if self.built[position] is None:
                self.built[position] = build(self.raw[position], position)
                first = min(first, position)
        self._unbuilt = len(self.raw)
        result = cast(list[Unit], list(self.built))  # every one is built now
        self.first_built = first
        if self.prefix is not None and first < self.prefix[0]:
            self.prefix = None
        self._tools_valid = min(self._tools_valid, first)
        return result

    def tools(
        self, units: list[Unit], category: Callable[[str], str | None]
    ) -> tuple[list[str], list[str]]:
        """Compactable tool nodes of the whole walk (oldest first) and the other tool names,
        recomputed only from the first unit that changed."""
        start = min(self._tools_valid, len(units))
        del self._compactable[
            self._compactable_at[start]
            if start < len(self._compactable_at)
            else len(self._compactable) :
        ]
        del self._compactable_at[start:]
        state = self._state
        if state is not None:  # placeholders: one pass over their nodes, not a call each
            category = functools.cache(category)
        for unit in units[start:]:
            self._compactable_at.append(len(self._compactable))
            if state is not None and not unit.items and unit.kind != "layer":
                compactable, others = hidden_tools(unit.node_ids, state, category)
            else:
                compactable, others = unit_tools(unit, category)
            self._compactable.extend(compactable)
            self._kept_tools |= others
        self._tools_valid = len(units)
        return self._compactable, sorted(self._kept_tools)

    def tools_between(
        self, first: int, end: int, category: Callable[[str], str | None]
    ) -> tuple[list[str], set[str]]:
        """The compactable tool outputs of the built units ``first`` to ``end`` (as
        ``tools`` last found them) and their other tool names."""
        at = self._compactable_at
        start = at[first]
        stop = at[end] if end < len(at) else len(self._compactable)
        others: set[str] = set()
        for unit in self.built[first:end]:
            if unit is not None:
                others |= unit_tools(unit, category)[1]
        return self._compactable[start:stop], others
