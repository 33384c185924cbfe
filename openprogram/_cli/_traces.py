"""Traces: import one into a session, replay one turn by turn (`bench` replays many)."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.progress import Progress

from context import Policy, records_path
from graph import ConversationGraph, MemoryStore, Store, new_id
from openprogram._cli._common import (
    UsageError,
    common_options,
    console,
    encoding,
    folder_of,
    open_store,
    print_json,
    session_id,
    state_dir,
    token_budget,
)
from openprogram._errors import OpenProgramError
from openprogram._reports._tables import Grid
from openprogram._words import counted


def cmd_import(args: argparse.Namespace) -> int:
    """Import a trace. A trace some session already holds goes to that session (only its
    new records, if it grew); a session that holds another conversation is refused
    unless ``--append``."""
    from graph import is_export

    if is_export(args.trace):
        return _load_export(args)
    from openprogram.importers import find_import, import_parsed, parse_trace

    parsed = parse_trace(args.trace, format=args.format, skip_bad=args.skip_bad)
    store = open_store(args, create=True)
    found = find_import(store, parsed)
    if found is not None and args.session and found[0] != args.session and not args.append:
        raise UsageError(
            f"{args.trace} is already imported into session {found[0]}; "
            f"`openprogram copy {found[0]} --to DB --as {args.session}` makes a second copy"
        )
    session = args.session or (found[0] if found else new_id())
    created = not store.has_session(session)
    if created and args.append:
        raise UsageError(
            f"--append adds to a session that exists; there is no session {session!r} in "
            f"{store.url} (`openprogram sessions` lists them; without --append, --session "
            "names a new session)"
        )
    graph = ConversationGraph(store, session)
    try:
        stats = import_parsed(parsed, graph, append=args.append)
    except BaseException:
        if created and not store.load(session).records:
            store.delete_session(session)  # ours, and still empty: leave no trace of the attempt
        raise
    if stats.already_imported:
        console.print(
            f"{args.trace} already imported: session {graph.session} holds all its "
            f"{counted(stats.held, 'record')}; nothing added"
        )
        return 0
    grew = f" after the {counted(stats.held, 'record')} it held" if stats.held else ""
    made = "new session" if created else "session"
    console.print(
        f"{made} {graph.session}: {counted(stats.messages, 'message')}, "
        f"{counted(stats.tool_calls, 'tool call')}, {counted(stats.functions, 'function')} "
        f"({stats.format}){grew}; skipped {stats.skipped}"
    )
    for warning in stats.warnings[:20]:
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    return 0


def _load_export(args: argparse.Namespace) -> int:
    """An ``openprogram export`` file: the session comes back whole, with its ids."""
    from graph import load_export

    if args.append:
        raise UsageError("an exported session is loaded whole; --append does not apply")
    store = open_store(args, create=True)
    session = load_export(args.trace, store, args.session)
    nodes = len(ConversationGraph(store, session))
    console.print(
        f"session {session}: loaded {counted(nodes, 'node')} from the export {args.trace}, "
        "with its configuration, branches, layers, compaction records, tier state and receipts"
    )
    return 0


REPLAYED = "openprogram.replay"
"""Session-meta key of a replay: the trace's digest and the settings it ran under."""


def _replay_key(args: argparse.Namespace, budget: int) -> dict[str, Any]:
    import hashlib

    digest = hashlib.sha256(Path(args.trace).read_bytes()).hexdigest()
    return {
        "trace": digest,
        "policy": args.policy,
        "budget": budget,
        "model": args.model,
        "encoding": args.encoding,
        "format": args.format,
    }


def _replayed(store: Store, key: dict[str, Any]) -> str | None:
    """The session of ``store`` that holds this very replay (same trace and settings)."""
    for info in store.sessions():
        if store.session_meta(info.id).get(REPLAYED) == key:
            return info.id
    return None


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay a trace into a new session: its messages, and the layers, records, receipts
    and configuration the cascade made (our policies), so ``collapses``, ``records`` and
    ``context`` show what the replay did. The same replay again (same trace and settings)
    into the same database reuses the session that holds it."""
    from openprogram._runtime._session import Session
    from openprogram.bench import our_policies

    if args.plot:
        from openprogram._reports._plot import check_plot_target

        check_plot_target(Path(args.plot))
    ours = args.policy in our_policies()
    preset = "progressive" if args.policy == "progressive" else "claude-code"
    chosen = Policy.named(preset, args.model) if args.model else None
    budget = args.budget if args.budget is not None else (chosen.budget if chosen else 32_000)
    store = MemoryStore() if args.memory else open_store(args, create=True)
    key = _replay_key(args, budget)
    if not args.memory and (held := _replayed(store, key)) is not None:
        if args.json:
            print_json({"session": held, "already_replayed": True})
            return 0
        console.print(
            f"{args.trace} was replayed with these settings already: session {held} in "
            f"{store.url} holds it (`openprogram collapses {held}`, `records {held}`, "
            f"`context {held}`); nothing replayed"
        )
        return 0
    session = None
    if ours:
        session = Session(
            store,
            policy=chosen or Policy.named(preset),
            budget=budget,
            history_tools=False,
            state_dir=state_dir(args),
        )
        graph = session.graph
    else:
        graph = ConversationGraph(store, new_id())
    try:
        return _replay_into(args, graph, session, key, budget, chosen)
    finally:
        if session is not None:
            session.close()


def _replay_into(
    args: argparse.Namespace,
    graph: ConversationGraph,
    session: Any,
    key: dict[str, Any],
    budget: int,
    chosen: Policy | None,
) -> int:
    from openprogram.bench import MessageCounter, Turn, format_table, load_trace, run_policy

    # A stored replay is a new session each run, so its ids are seeded by that session.
    trace = load_trace(
        Path(args.trace), format=args.format, graph=graph, seed=f"import:{graph.session}"
    )
    graph.store.update_session_meta(graph.session, {REPLAYED: key})
    counter = MessageCounter(args.encoding)
    folder = session.folder if session is not None else folder_of(args, graph.store)
    history: list[int] = []
    prompt: list[int] = []
    fired: list[list[str]] = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"replaying {trace.name}", total=len(trace.turns))

        def on_turn(turn: Turn, tiers: list[str]) -> None:
            history.append(turn.history_tokens)
            prompt.append(turn.prompt_tokens)
            fired.append(tiers)
            progress.advance(task)

        metrics = run_policy(
            trace,
            args.policy,
            budget,
            counter,
            on_turn=on_turn,
            state_dir=folder,
            policy_object=chosen,
            engine=session.engine if session is not None else None,
        )
    if metrics is None:
        raise OpenProgramError(f"policy {args.policy} does not apply to {trace.name}")
    if args.json:
        print_json({**metrics.to_json(), "session": graph.session})
        return 0
    console.print(f"session {graph.session} in {graph.store.url}")
    console.print(format_table([metrics], title=f"replay of {trace.name} at {budget:,} tokens"))
    records = session.engine.records() if session is not None else []
    table = Grid("compactions (new decisions)")
    table.column("tier", "id")
    table.column("fired", "number")
    table.column("tokens saved when fired", "number")
    tiers = Counter(r.tier for r in records)
    saved: Counter[str] = Counter()
    for record in records:
        saved[record.tier] += record.tokens_before - record.tokens_after
    for tier, count in tiers.items():
        table.row(tier, f"{count:,}", f"{saved[tier]:,}")
    console.print(table)
    if not records:
        console.print("no compaction was needed")
    elif args.memory:
        console.print(
            f"{counted(len(records), 'record')}, in memory only (gone on exit; --db keeps the "
            "session)"
        )
    else:
        path = records_path(folder.path, graph.session)
        console.print(
            f"{counted(len(records), 'record')} in {graph.store.url} (`openprogram records "
            f"{graph.session}`), logged to {path}"
        )
    if args.plot:
        from openprogram._reports._plot import plot_replay

        plot_replay(Path(args.plot), trace.name, history, prompt, fired, budget)
        console.print(f"plot: {args.plot}")
    return 0


FORMATS = ("claude-code", "codex", "openai", "swe-agent", "mini-swe-agent")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = common_options()
    imp = sub.add_parser(
        "import",
        parents=[common],
        help="import a trace into a session (again: only what is new)",
        description="Import a trace into a session. A trace this database already holds is "
        "recognized record by record: importing it again adds nothing, and a trace that grew "
        "adds only its new records, to the session that holds the rest.",
    )
    imp.add_argument("trace", help="the trace file")
    imp.add_argument(
        "--session",
        type=session_id,
        help="the session to import into: a new session of this name when there is none "
        "(with --append: one that exists); default: the session that holds this trace "
        "already, else a new one",
    )
    imp.add_argument(
        "--append",
        action="store_true",
        help="add the trace after the conversation --session already holds",
    )
    imp.add_argument(
        "--format",
        choices=FORMATS,
        help="the trace format (default: detected from the file)",
    )
    imp.add_argument(
        "--skip-bad",
        action="store_true",
        help="skip malformed records (counted and reported) instead of stopping at the first",
    )
    imp.set_defaults(run=cmd_import)
    replay = sub.add_parser(
        "replay", parents=[common], help="render every turn of a trace and report the tiers"
    )
    replay.add_argument("trace")
    replay.add_argument("--budget", type=token_budget, help="default: 32000, or the model's budget")
    replay.add_argument(
        "--policy",
        default="claude-code",
        choices=("claude-code", "progressive", "none", "masking", "trim", "native"),
        help="our presets, or a baseline to compare (default: claude-code)",
    )
    replay.add_argument("--model", help="take window and tokenizer from this model's entry")
    replay.add_argument("--memory", action="store_true", help="import into memory, not --db")
    replay.add_argument("--plot", help="write a PNG of tokens per turn")
    replay.add_argument("--format")
    replay.add_argument("--encoding", default="cl100k_base", type=encoding)
    replay.add_argument("--json", action="store_true")
    replay.set_defaults(run=cmd_replay)
