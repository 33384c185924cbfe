"""The last step of a render, resumed: integrity repairs and sources past what is unchanged.

A render's last step (``Cascade.finish``) repairs the prompt's integrity (pairs, call ids,
provider roles) and names each message's source, passes over every message. A live agent's
next prompt is its last one plus a few messages, and the engine hands back the very message
objects of the last render for what did not change (it never changes a message it made),
so each pass here remembers where it stood after every message and starts again from the
last point the new prompt shares with the one before, by identity. The integrity passes
are ``_passes``'s, the very steps ``_integrity``'s functions run over a whole prompt, so
what they return is what a full pass returns (``test_render_incremental`` drives both).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graph import ChatMessage

from .._prefix import same_prefix
from .._store._source import MessageSource
from .._tiers._request import latest_request
from .._tiers._tier import TierContext
from .._view import Item, Unit, View
from ._passes import RepairPass, RolesPass, UniquePass
from ._sources import _last_task, _source, added, merged

Message = ChatMessage
KEPT_FRAMES = 8
"""Frames whose last passes are kept (a function's frame is rendered while it runs)."""


@dataclass
class _Scan:
    """One frame's passes, as the last finish left them."""

    repair: RepairPass = field(default_factory=RepairPass)
    unique: UniquePass = field(default_factory=UniquePass)
    roles: RolesPass = field(default_factory=RolesPass)


@dataclass
class _Last:
    """What ``Finisher._sources`` saw and gave last: the units, the request they were
    sourced under, the sources, where each unit's end in them (``ends[k]``: after the
    first k units) and how many leading units were all kept (``Finisher._units``)."""

    units: tuple[Unit, ...] = ()
    current: str | None = None
    task: Unit | None = None
    found: list[MessageSource] = field(default_factory=list)
    ends: list[int] = field(default_factory=lambda: [0])
    kept: int = 0
    messages: list[Message] = field(default_factory=list)
    """The messages of ``units`` the passes ran on (``Finisher.finish`` sets them)."""


class Finisher:
    """The integrity repairs and sources of each frame's prompts, resumed where the next
    prompt starts as the last one did. Owned by a cascade (so by one engine, used under its
    lock); :meth:`clear` forgets it all."""

    def __init__(self) -> None:
        self._scans: dict[str | None, _Scan] = {}
        self._units: dict[int, tuple[Unit, list[MessageSource], frozenset[str | None]]] = {}
        """Each unit's sources when it holds neither a layer, nor the current request,
        nor is the task shown as the request: they name no render and depend on nothing
        else, so they hold while the unit is the same object."""
        self._items: dict[int, tuple[Item, str, MessageSource]] = {}
        """Each item's source, in a unit of that kind, with no layer, not the current
        request (for units made anew around items that did not change)."""

        self._last = _Last()
        """The last call's units and sources (what the next one may start with)."""

    def clear(self) -> None:
        self._scans.clear()
        self._units.clear()
        self._items.clear()
        self._last = _Last()

    def finish(
        self,
        view: View,
        ctx: TierContext,
        merge_roles: bool,
        messages: list[Message] | None = None,
    ) -> tuple[list[Message], list[str], list[MessageSource]] | None:
        """The repaired messages, what the repairs did, and each one's source (its
        ``render`` left empty: the caller names the render); None when a message object
        is shown twice (a source is then looked up by object: the whole pass does it).
        ``messages``: the view's, when the caller has them already."""
        messages = view.messages if messages is None else messages
        if len(set(map(id, messages))) != len(messages):
            return None
        before = self._last.messages
        shown, same = self._sources(view, ctx)
        scan = self._scans.pop(ctx.frame, None) or _Scan()
        self._scans[ctx.frame] = scan  # the newest last: the oldest frames are forgotten
        while len(self._scans) > KEPT_FRAMES:
            del self._scans[next(iter(self._scans))]
        # Each pass is told how many leading messages it has seen already, when it is
        # known: the units shared with the last call's, what the pass before it kept.
        repaired, unique = scan.repair.fixed, scan.unique.fixed
        scan.repair.run(messages, same if scan.repair.inputs is before else 0)
        self._last.messages = messages
        notes = list(scan.repair.notes)
        kept = scan.repair.carried if scan.unique.inputs is repaired else 0
        scan.unique.run(scan.repair.fixed, kept)
        fixed = scan.unique.fixed
        origin = scan.repair.origin
        if -1 in origin:  # placeholders the repairs added
            placeholder = added("")
            sources = [shown[i] if i >= 0 else placeholder for i in origin]
        else:
            sources = list(map(shown.__getitem__, origin))
        notes += scan.unique.notes
        if merge_roles:
            kept = scan.unique.carried if scan.roles.inputs is unique else 0
            fixed, role_notes, groups = scan.roles.run(fixed, kept)
            sources = [merged(sources, group, "") for group in groups]
            notes += role_notes
        return list(fixed), notes, list(sources)

    def _sources(self, view: View, ctx: TierContext) -> tuple[list[MessageSource], int]:
        """``view_sources`` (with no render named): each unit's kept while it is the same
        object, else each item's while it is, in a unit of the same kind (tiers make new
        units of items they did not change); a unit with a layer, the task shown as the
        request and the current request are made again. The units the last call started
        with, all kept, under the same request, are not visited: their sources are the
        start of the last call's, found in C. Also how many messages those units hold."""
        request = latest_request(ctx)
        current = None if request is None else request.node_id
        task = _last_task(view) if current is None else None
        last = self._last
        shared = 0
        units, known = {}, self._units
        if last.current == current and last.task is task:
            shared = min(same_prefix(last.units, view.units), last.kept)
            units, known = known, {}  # the shared units' entries stay; the rest moves
            for unit in last.units[shared:]:
                entry = units.pop(id(unit), None)
                if entry is not None:
                    known[id(unit)] = entry
        ends = last.ends[: shared + 1]
        found = last.found[: ends[-1]]
        kept = shared
        items: dict[int, tuple[Item, str, MessageSource]] = {}
        known_items = self._items
        for unit in view.units[shared:]:
            plain = unit is not task and unit.layer is None
            entry = known.get(id(unit)) or units.get(id(unit))
            if entry is not None and entry[0] is unit and plain and current not in entry[2]:
                units[id(unit)] = entry
                found += entry[1]
            elif not plain:
                found += [
                    _source(item, unit, ctx, "", current, unit is task) for item in unit.items
                ]
            else:
                sources = []
                for item in unit.items:
                    if item.node_id == current:
                        sources.append(_source(item, unit, ctx, "", current, False))
                        continue
                    hit = known_items.get(id(item))
                    if hit is None or hit[0] is not item or hit[1] != unit.kind:
                        hit = (item, unit.kind, _source(item, unit, ctx, "", current, False))
                    items[id(item)] = hit
                    sources.append(hit[2])
                ids = frozenset(item.node_id for item in unit.items)
                if current not in ids:
                    units[id(unit)] = (unit, sources, ids)
                found += sources
            if kept == len(ends) - 1 and id(unit) in units:
                kept += 1
            ends.append(len(found))
        self._units, self._items = units, items
        self._last = _Last(view.units, current, task, found, ends, kept)
        return found, ends[shared]
