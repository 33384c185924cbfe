"""Layers: compact a session now, list its collapses, roll one back, expand what one hides."""

from __future__ import annotations

import argparse

from context import RollbackFacts, UnknownLayer
from graph import ConversationGraph, is_handle, resolve_ref
from openprogram._cli._common import (
    UsageError,
    common_options,
    console,
    engine_for,
    existing_session,
    open_store,
    print_json,
    token_budget,
)
from openprogram._reports._views import SAVED, layer_reasons, layer_savings, layers_table
from openprogram._runtime._history import messages_text
from openprogram._words import counted


def cmd_compact(args: argparse.Namespace) -> int:
    graph = existing_session(args, args.session)
    engine = engine_for(args, graph)
    layer = engine.compact(args.focus)
    record = engine.operation
    assert record is not None  # a compaction that made its layer has its record
    before, after = record.tokens_before, record.tokens_after
    saved = layer_savings(engine, [layer])[layer.id]
    console.print(
        f"compacted {counted(len(layer.covers), 'node')} of {graph.session} into layer {layer.id}: "
        f"tokens saved {saved:,} ({SAVED}); next prompt {before:,} → {after:,} tokens (what "
        "is sent: the nodes were already cut down by other tiers)"
    )
    return 0


def cmd_collapses(args: argparse.Namespace) -> int:
    graph = existing_session(args, args.session, read_only=True)
    engine = engine_for(args, graph)
    layers = engine.layers()
    saved = layer_savings(engine, layers)
    reasons = layer_reasons(layers, engine.records())
    if args.json:
        print_json(
            [
                {
                    "id": layer.id,
                    "kind": layer.kind,
                    "active": layer.active,
                    "rolled_back": layer.rolled_back,
                    "covers": list(layer.covers),
                    "tokens_saved": saved[layer.id],
                    "reason": reasons.get(layer.id),
                    "builds_on": list(layer.builds_on),
                }
                for layer in layers
            ]
        )
        return 0
    if not layers:
        console.print(f"session {graph.session} has no layers")
        return 0
    title = f"layers of {graph.session}"
    console.print(layers_table(layers, saved, title=title, reasons=reasons))
    console.print(f"[dim]tokens saved: {SAVED}[/]")
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    graph = existing_session(args, args.session)
    engine = engine_for(args, graph)
    known = {layer.id for layer in engine.layers()}
    layer = resolve_ref(graph.state, args.layer) or args.layer  # an id or a handle (L3)
    if layer not in known and graph.store.session_of(layer) is None:
        raise UnknownLayer(
            f"no layer {args.layer!r} in session {graph.session}; "
            f"`openprogram collapses {graph.session}` lists them"
        )
    done = engine.rollback(layer, reason=args.reason)
    record = engine.operation  # the rollback's record measured the next prompt
    assert record is not None
    ids = ", ".join(layer.id for layer in done)
    before, after = record.tokens_before, record.tokens_after
    console.print(f"rolled back {ids}: next prompt {before:,} → {after:,} tokens")
    facts = record.facts
    again = facts.again if isinstance(facts, RollbackFacts) else []
    if not again:
        console.print("the restored rounds are shown whole in the next prompt")
    for made in again:
        console.print(
            f"they do not all fit: the next render makes a {made.kind} layer again over "
            f"{made.covers} nodes from {made.first} (listed by `collapses` once it is made)"
        )
    return 0


def cmd_expand(args: argparse.Namespace) -> int:
    """What a layer or a finished function hides, found by id in whichever session, or by
    the handle a prompt showed (``L3``, ``n42``) in ``--session``."""
    store = open_store(args, create=False, read_only=True)
    session = args.session or store.session_of(args.id)
    if session is None and is_handle(args.id):
        raise UsageError(
            f"{args.id!r} is a handle (as a prompt shows it): give --session SESSION to say "
            "whose; ids need none"
        )
    if session is None:
        raise UnknownLayer(
            f"no layer or node {args.id!r} in {store.url}; `openprogram collapses SESSION` "
            "lists layers, `openprogram show SESSION` nodes"
        )
    graph = ConversationGraph(store, session)
    engine = engine_for(args, graph)
    messages = engine.expand(args.id, depth=args.depth)
    if args.json:
        print_json(messages)
    else:
        console.print(messages_text(messages), markup=False)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = common_options()
    compact = sub.add_parser(
        "compact", parents=[common], help="summarize all but the newest rounds now (a layer)"
    )
    compact.add_argument("session")
    compact.add_argument("--focus", help="what the summary must keep (like /compact FOCUS)")
    compact.add_argument("--model")
    compact.add_argument("--policy", choices=("claude-code", "progressive"))
    compact.add_argument("--budget", type=token_budget)
    compact.set_defaults(run=cmd_compact)
    collapses = sub.add_parser(
        "collapses", parents=[common], help="a session's layers: active or rolled back"
    )
    collapses.add_argument("session")
    collapses.add_argument("--json", action="store_true")
    collapses.set_defaults(run=cmd_collapses)
    rollback = sub.add_parser(
        "rollback", parents=[common], help="roll back a layer (and those built on it)"
    )
    rollback.add_argument("session")
    rollback.add_argument("layer")
    rollback.add_argument("--reason")
    rollback.set_defaults(run=cmd_rollback)
    expand = sub.add_parser(
        "expand", parents=[common], help="what a layer or a finished function hides"
    )
    expand.add_argument("id", help="a layer or function node: its id, or its handle (L3, n42)")
    expand.add_argument("--session", help="the session a handle belongs to")
    expand.add_argument("--depth", type=int, default=1)
    expand.add_argument("--json", action="store_true")
    expand.set_defaults(run=cmd_expand)
