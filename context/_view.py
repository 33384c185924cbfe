"""The immutable view the cascade works on: messages grouped into units.

A unit is what compaction may keep or drop whole: the system prompt, the first task
message, a round (the user messages before one assistant message, that message, and its
tool pairs), or a finished function seen as one call/result pair. Tiers never touch the
graph: they map a :class:`View` to a new one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cached_property
from itertools import compress
from operator import attrgetter
from typing import Literal, TypeAlias

import msgspec

from graph import ChatMessage, Node

UnitKind = Literal["system", "task", "round", "call", "note", "stub", "layer"]

TURN_KINDS: tuple[UnitKind, ...] = ("round", "call")
"""The units a layer may cover: a round, or a finished function seen as one call."""


Variant: TypeAlias = Literal[
    "full",
    "pending",
    "call",
    "result:running",
    "result:completed",
    "result:error",
    "result:interrupted",
    "offloaded",
    "reduced",
    "cleared",
    "edit-cleared",
    "superseded",
    "cut",
    "stub",
    "note",
    "edit-placeholder",
    "layer",
    "working",
]
"""How an item shows its node (part of the stored token-count key ``node_id:variant``; a
layer's messages add their index: ``layer_id:layer:0``)."""

RESULT_VARIANTS: dict[str, Variant] = {
    "running": "result:running",
    "completed": "result:completed",
    "error": "result:error",
    "interrupted": "result:interrupted",
}
"""A function result's variant by the function's status."""


class Item(msgspec.Struct, frozen=True):
    """One message of the prompt, the node it renders and its token count."""

    message: ChatMessage
    tokens: int
    node_id: str | None = None
    tool_name: str | None = None
    variant: Variant = "full"
    """How the node is shown: full, reduced, offloaded, cleared, stub, cut."""


class Unit(msgspec.Struct, frozen=True, dict=True):
    """Messages that stay or go together (``dict=True`` only to cache ``tokens``)."""

    items: tuple[Item, ...]
    kind: UnitKind
    position: int
    pinned: bool = False
    running: bool = False
    node_ids: tuple[str, ...] = ()
    count: int = 1
    """How many units this one stands for (a note for dropped units says how many)."""
    layer: str | None = None
    """The layer this unit shows (kind ``layer``)."""

    @cached_property
    def tokens(self) -> int:
        return sum(item.tokens for item in self.items)

    @cached_property
    def full_outputs(self) -> bool:
        """Whether an item is a tool output shown in full: the only items the tiers that
        shorten outputs may change. A unit is kept across renders while nothing in it
        changed (``_layout``), so this is found once per unit, not once per render."""
        return any(
            item.variant == "full" and item.message.get("role") == "tool" for item in self.items
        )


class View(msgspec.Struct, frozen=True, dict=True):
    """The units of one render, plus tokens that are not messages (tool schemas).

    A view never changes, so its totals are computed once: a tier that loops over
    segments (collapse over a long imported session) asks for them after every step, and
    summing every unit each time made its cost grow with the square of the history.
    """

    units: tuple[Unit, ...]
    extra_tokens: int = 0

    @cached_property
    def tokens(self) -> int:
        return self.extra_tokens + sum(unit.tokens for unit in self.units)

    @cached_property
    def message_count(self) -> int:
        return sum(len(unit.items) for unit in self.units)

    @property
    def messages(self) -> list[ChatMessage]:
        return [item.message for unit in self.units for item in unit.items]

    def replace(self, units: Iterable[Unit]) -> View:
        return View(tuple(units), self.extra_tokens)

    def swap(self, start: int, end: int, unit: Unit) -> View:
        """``units[start:end]`` replaced by ``unit``; totals already known are carried over
        (adjusted by what changed), not summed again."""
        old = self.units[start:end]
        after = View((*self.units[:start], unit, *self.units[end:]), self.extra_tokens)
        known = self.__dict__
        if "tokens" in known:
            after.__dict__["tokens"] = known["tokens"] - sum(u.tokens for u in old) + unit.tokens
        if "message_count" in known:
            removed = sum(len(u.items) for u in old)
            after.__dict__["message_count"] = known["message_count"] - removed + len(unit.items)
        return after


class RawUnit(msgspec.Struct, frozen=True):
    """A unit before counting: messages with the nodes they came from."""

    kind: UnitKind
    entries: tuple[tuple[ChatMessage, Node | None], ...]
    running: bool
    pinned: bool = False
    start: int = 0
    """Index of the unit's first step in the walk."""
    end: int = 0
    """Index just after its last step."""
    task_before: bool = False
    """Whether the frame's task message came before this unit (grouping state)."""


def is_native_compaction(node: Node) -> bool:
    """Nodes an importer kept from the agent's own compaction: ordinary renders skip them."""
    return bool(node.meta.get("native_compaction"))


def unit_tools(unit: Unit, category: Callable[[str], str | None]) -> tuple[list[str], set[str]]:
    """A unit's tool outputs of compactable tools (node ids, in order) and its other tool names.

    ``category`` maps a tool name to its compactable category, or None (see ``Policy``).
    """
    compactable: list[str] = []
    others: set[str] = set()
    for item in unit.items:
        if item.tool_name is None or item.node_id is None:
            continue
        if category(item.tool_name) is None:
            others.add(item.tool_name)
        elif item.message.get("role") == "tool":
            compactable.append(item.node_id)
    return compactable, others


def map_items(
    view: View, change: Callable[[Item], Item], *, outputs_only: bool = False
) -> tuple[View, list[str]]:
    """Apply ``change`` to every item; return the new view and the node ids it changed.

    Unchanged units (``change`` returned the same objects) are kept as they were.
    ``outputs_only``: ``change`` leaves every item but a tool output shown in full as it
    is, so units without one (``Unit.full_outputs``) are not visited (found in C).
    """
    changed: list[str] = []
    units = list(view.units)
    visited: Iterable[int] = range(len(units))
    if outputs_only:
        visited = list(compress(visited, map(_FULL_OUTPUTS, units)))
    for at in visited:
        unit = units[at]
        items = unit.items
        fresh: list[Item] | None = None  # made at the first change: most units have none
        for index, item in enumerate(items):
            new = change(item)
            if new is not item:
                if fresh is None:
                    fresh = list(items[:index])
                changed.append(item.node_id or "?")
            if fresh is not None:
                fresh.append(new)
        if fresh is not None:
            units[at] = msgspec.structs.replace(unit, items=tuple(fresh))
    return (view.replace(units) if changed else view), changed


_FULL_OUTPUTS = attrgetter("full_outputs")
