"""Rich views of a session for the command line and the demo: the function tree, the
token distribution of a render, compaction records, layers."""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from rich.markup import escape
from rich.tree import Tree

from context import (
    CompactionRecord,
    LayerFacts,
    Rendered,
    RollbackFacts,
    TokenCounter,
    as_record_tier,
)
from graph import GraphReader, LayerInfo, Node, layer_handle, text_of
from openprogram._reports._tables import Grid
from openprogram._words import counted

_STATUS = {"running": "yellow", "completed": "green", "error": "red", "interrupted": "magenta"}


def _label(node: Node, graph: GraphReader) -> str:
    payload: Any = node.payload
    if node.kind == "function":
        color = _STATUS.get(node.status, "white")
        return f"[bold]{payload.name}[/] [{color}]{node.status}[/] [dim]{node.id}[/]"
    tools = graph.tools(node.id)
    calls = f" → {', '.join(str(t.payload.name) for t in tools)}" if tools else ""
    text = " ".join(text_of(payload.content).split())
    text = text if len(text) <= 60 else text[:59] + "…"
    return f"[blue]{node.role}[/] [dim]{node.id}[/] {escape(repr(text))}{escape(calls)}"


def session_tree(
    graph: GraphReader,
    *,
    title: str,
    fired: Mapping[str | None, Mapping[str, int]] | None = None,
    messages: bool = True,
    heads: Mapping[str, str | None] | None = None,
) -> Tree:
    """Functions nested under their callers (status colored: running, interrupted…), the
    tiers that fired inside each, and the layers over top-level nodes; ``heads`` (branch
    name → head node) marks each branch's head, so a checkout shows where the session is."""
    tree = Tree(title)
    marks: dict[str, list[str]] = collections.defaultdict(list)
    for name, head in (heads or {}).items():
        if head is not None:
            marks[head].append(name)
    covered: dict[str, list[LayerInfo]] = collections.defaultdict(list)
    for layer in graph.layers():
        for node_id in layer.covers[:1]:
            covered[node_id].append(layer)
    if fired and fired.get(None) and _tiers(fired[None]):
        tree.add(f"[cyan]tiers at the top level:[/] {_tiers(fired[None])}")
    children: dict[str | None, list[Node]] = collections.defaultdict(list)
    for node in graph.nodes():
        if node.kind == "tool":
            continue
        children[graph.state.caller.get(node.id)].append(node)

    def add(branch: Tree, caller: str | None) -> None:
        for node in children.get(caller, []):
            for layer in covered.get(node.id, []):
                state = "active" if layer.active else "rolled back"
                branch.add(
                    f"[magenta]layer {layer.kind}[/] {layer.id} ({state}, "
                    f"{counted(len(layer.covers), 'node')})"
                )
            mark = ""
            if marks.get(node.id):
                mark = f" [bold reverse]◀ head of {', '.join(marks[node.id])}[/]"
            if node.kind == "function":
                sub = branch.add(_label(node, graph) + mark)
                if fired and fired.get(node.id) and _tiers(fired[node.id]):
                    sub.add(f"[cyan]tiers:[/] {_tiers(fired[node.id])}")
                add(sub, node.id)
            elif messages or mark:
                branch.add(_label(node, graph) + mark)

    add(tree, None)
    return tree


_ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")


def fired_by_frame(
    graph: GraphReader, records: Sequence[CompactionRecord]
) -> dict[str | None, collections.Counter[str]]:
    """Which tiers fired in which function's prompts (``None``: the top level). A record
    names its render and that render's frame; one written before records did names the
    nodes it offloaded, cut or put under a layer, and the records of one render share its
    timestamp, so one that names no node (a microcompact, a snip) goes with those."""
    layers = {info.id: info for info in graph.layers()}
    known: dict[str, str | None] = {}
    frames: list[tuple[bool, str | None]] = []
    for record in records:
        if record.clock is not None:  # written since records name their render
            frames.append((True, record.frame))
            continue
        frames.append(_frame_of(graph, layers, record))
        if frames[-1][0]:
            known.setdefault(record.timestamp, frames[-1][1])
    fired: dict[str | None, collections.Counter[str]] = {}
    for record, (found, frame) in zip(records, frames, strict=True):
        frame = frame if found else known.get(record.timestamp)
        fired.setdefault(frame, collections.Counter())[record.tier] += 1
    return fired


def _frame_of(
    graph: GraphReader, layers: Mapping[str, LayerInfo], record: CompactionRecord
) -> tuple[bool, str | None]:
    """The frame of a record written before records named their render, from the ids it
    holds."""
    text = json.dumps([record.offloaded, record.details], default=str)
    for found in _ULID.findall(text):
        covers = layers[found].covers if found in layers else ()
        node_id = covers[0] if covers else found
        if node_id in graph:
            node_id = graph.state.requested_by.get(node_id, node_id)  # a tool: its call
            frame = graph.state.caller.get(node_id)
            while frame is not None and graph.get(frame).kind != "function":
                frame = graph.state.caller.get(frame)
            return True, frame
    return False, None


def _tiers(counts: Mapping[str, int]) -> str:
    """Tiers by how often they fired; a rollback is the user's act, not a tier."""
    return ", ".join(
        f"{tier} ×{n}" if n > 1 else tier
        for tier, n in counts.items()
        if as_record_tier(tier) != "rollback"
    )


def distribution_table(rendered: Rendered, counter: TokenCounter, *, title: str) -> Grid:
    """Where a prompt's tokens go (by part, as ``openprogram._reports._prompts.parts`` tells them)
    and what each tier saved."""
    from openprogram._reports._prompts import parts, saved_by_tier

    table = Grid(title)
    table.column("part", key=True)
    table.column("tokens", "number")
    table.column("share of budget", "number")
    for kind, tokens in parts(rendered, counter).most_common():
        table.row(kind, f"{tokens:,}", f"{tokens / rendered.budget:.1%}")
    table.row(
        "[bold]total[/]",
        f"[bold]{rendered.tokens:,}[/]",
        f"{rendered.tokens / rendered.budget:.1%}",
    )
    table.section()
    for tier, tokens in saved_by_tier(rendered).items():
        table.row(f"saved by {tier}", f"{tokens:,}", "")
    return table


def records_table(records: Sequence[CompactionRecord], *, title: str) -> Grid:
    """One row per compaction record: when, tier, tokens before and after, what it did."""
    table = Grid(title)
    table.column("time", "id", key=True)
    table.column("tier", "id", key=True)
    table.column("before", "number")
    table.column("after", "number")
    table.column("ratio", "number")
    table.column("what", "id")  # layer ids, one a line: never cut
    table.column("error")
    for record in records:
        what = ""
        if record.details.get("layer"):
            what = f"layer {record.details['layer']}"
        elif record.details.get("trigger"):
            what = f"trigger {record.details['trigger']}"
        elif record.offloaded:
            what = f"{len(record.offloaded)} file(s)"
        elif record.details.get("layers"):
            what = "\n".join(["rolled back", *record.details["layers"]])
        table.row(
            record.timestamp[11:19],
            record.tier,
            f"{record.tokens_before:,}",
            f"{record.tokens_after:,}",
            f"{record.ratio:.2f}",
            what,
            (record.error or "")[:60],
        )
    return table


def layers_table(
    layers: Sequence[LayerInfo],
    saved: Mapping[str, int],
    *,
    title: str,
    reasons: Mapping[str, str] | None = None,
) -> Grid:
    """One row per layer: its id and the handle prompts show it by, kind, state, what it
    covers, tokens saved, why it was made, what it builds on (one id a line, so every id
    can be copied whole)."""
    table = Grid(title)
    table.column("layer", "id", key=True)
    table.column("handle", "id")
    table.column("kind", "id")
    table.column("state")
    table.column("covers", "number")
    table.column("tokens saved", "number")
    table.column("why")
    table.column("builds on", "id")
    for layer in layers:
        state = "active" if layer.active else f"rolled back (seq {layer.rolled_back})"
        table.row(
            layer.id,
            layer_handle(layer),
            layer.kind,
            state,
            counted(len(layer.covers), "node"),
            f"{saved.get(layer.id, 0):,}",
            (reasons or {}).get(layer.id, "—"),
            "\n".join(layer.builds_on) or "—",
        )
    return table


def layer_reasons(
    layers: Sequence[LayerInfo], records: Sequence[CompactionRecord]
) -> dict[str, str]:
    """Why each layer was made, from the record that made it (its reason: budget, manual…);
    a layer the render after a rollback made again where the restored rounds did not fit
    says "after rollback of X": one the budget made in the first render after the
    rollback over rounds it restored (the next turn's messages can move where a segment
    ends, so its size may differ from the rollback's ``again``), or, in records written
    before renders had ids, one of the kind, first node and size ``again`` named."""
    found: dict[str, str] = {}
    again: dict[tuple[str, str, int], str] = {}
    covers = {layer.id: frozenset(layer.covers) for layer in layers}
    waiting: list[tuple[str, frozenset[str]]] = []
    after: dict[str, list[tuple[str, frozenset[str]]]] = {}
    for record in records:
        facts = record.facts
        if isinstance(facts, RollbackFacts):
            undone = facts.layer or (facts.layers[0] if facts.layers else "?")
            again.update(((m.kind, m.first, m.covers), undone) for m in facts.again)
            restored = frozenset(n for x in facts.layers for n in covers.get(x, ()))
            waiting.append((undone, restored))
            continue
        if waiting and record.render is not None:
            after[record.render], waiting = waiting, []
        if isinstance(facts, LayerFacts) and facts.layer is not None:
            found[facts.layer] = facts.reason or record.tier
            made = covers.get(facts.layer, frozenset())
            for undone, restored in after.get(record.render or "", ()):
                if facts.reason in (None, "budget") and not made.isdisjoint(restored):
                    found[facts.layer] = f"after rollback of {undone}"
                    break
    ended = {layer.id: layer.rolled_back for layer in layers}
    for layer in layers:
        key = (layer.kind, layer.covers[0] if layer.covers else "", len(layer.covers))
        asked = again.get(key)
        when = ended.get(asked) if asked is not None else None
        if asked is not None and (when is None or layer.seq > when):
            found[layer.id] = f"after rollback of {again.pop(key)}"
    return found


SAVED = "the covered messages in full, less the layer's summary"
"""What "tokens saved" by a layer means, wherever it is shown (``compact``, ``collapses``)."""


def layer_savings(engine: Any, layers: Sequence[LayerInfo]) -> dict[str, int]:
    """Tokens each layer saves (:data:`SAVED`): its covered messages in full, less its
    replacement. The one definition ``compact`` and ``collapses`` both print."""
    counter = engine.counter
    found = {}
    for layer in layers:
        original = counter.count_messages(engine.expand(layer.id))
        replacement = layer.layer.replacement
        shown = counter.count_messages(replacement) if isinstance(replacement, list) else 0
        found[layer.id] = max(0, original - shown)
    return found
