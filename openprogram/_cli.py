"""The ``openprogram`` command line: demo, import, replay, bench, sessions, show, context,
records, export, delete."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from rich.tree import Tree

from context import Policy, delete_session, read_jsonl, records_path
from graph import (
    ConversationGraph,
    GraphError,
    SQLStore,
    export_graphml,
    export_json,
    new_id,
    text_of,
)
from openprogram._errors import OpenProgramError, SessionError

console = Console(width=None if sys.stdout.isatty() else 220)


def _default_traces() -> list[Path]:
    for base in (Path.cwd(), *Path.cwd().parents):
        candidate = base / "shared" / "traces"
        if candidate.is_dir():
            return [candidate]
    return []


def _existing(db: str | None, session: str) -> ConversationGraph:
    """Open a session that must already exist (reading never creates one)."""
    store = SQLStore(db)
    if not store.has_session(session):
        raise SessionError(
            f"no session {session!r} in {store.url}; `openprogram sessions` lists them"
        )
    return ConversationGraph(store, session)


def cmd_demo(args: argparse.Namespace) -> int:
    """The nested research agent, offline, under a small budget; then what it did."""
    from openprogram._demo import run_demo
    from openprogram._views import (
        distribution_table,
        layer_savings,
        layers_table,
        records_table,
        session_tree,
    )

    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("research agent", total=1)

        def step(done: int, total: int, what: str) -> None:
            progress.update(task, total=total, completed=done, description=what[:60])

        run = run_demo(args.db, args.budget, state_dir=args.state_dir, progress=step)
    session = run.session
    graph = session.graph
    console.rule("the session")
    title = f"session [bold]{session.id}[/] ({len(graph)} nodes, {session.store.url})"
    console.print(session_tree(graph, title=title, fired=run.fired, messages=False))
    console.rule("the next prompt, /context style")
    preview = session.engine.preview()
    console.print(
        distribution_table(
            preview,
            session.engine.counter,
            title=f"top level: {preview.tokens:,} of {preview.budget:,} tokens "
            f"({session.policy.context_window:,}-token window, {session.policy.name})",
        )
    )
    console.rule("compaction records")
    console.print(records_table(run.records, title=f"{len(run.records)} records"))
    layers = session.engine.layers()
    console.print(layers_table(layers, layer_savings(session.engine, layers), title="layers"))
    console.rule("the review read back a hidden investigation")
    console.print(run.review)
    if run.rolled_back is not None and run.before is not None and run.after is not None:
        console.rule("one rollback")
        console.print(
            f"rolled back collapse {run.rolled_back.id}: the top-level prompt went from "
            f"{run.before.tokens:,} to {run.after.tokens:,} tokens before the cascade, "
            f"which then keeps it under {run.after.budget:,} "
            f"({', '.join(dict.fromkeys(a.tier for a in run.after.actions)) or 'nothing to do'})"
        )
    fired = sorted({tier for counts in run.fired.values() for tier in counts})
    console.print(f"tiers that fired: {', '.join(fired)}")
    console.print(f"records: {session.policy.state_dir}/records/{session.id}.jsonl")
    session.close()
    return 0


def _tree(graph: ConversationGraph, tree: Tree, caller: str | None) -> None:
    for node in graph.nodes():
        if graph.state.caller.get(node.id) != caller or node.kind == "tool":
            continue
        if node.kind == "function":
            branch = tree.add(f"[green]function[/] {node.payload.name} ({node.status}) {node.id}")
            _tree(graph, branch, node.id)
        else:
            tools = graph.tools(node.id)
            extra = f" → {', '.join(str(t.payload.name) for t in tools)}" if tools else ""
            tree.add(f"[blue]{node.role}[/] {text_of(node.payload.content)[:60]!r}{extra}")  # type: ignore[union-attr]


def _actions(actions: Sequence[object]) -> None:
    table = Table(title="what each tier did")
    for column in ("tier", "what", "tokens before", "after"):
        table.add_column(column)
    for action in actions:
        table.add_row(action.tier, action.what, str(action.tokens_before), str(action.tokens_after))  # type: ignore[attr-defined]
    console.print(table)


def cmd_import(args: argparse.Namespace) -> int:
    from openprogram.importers import import_parsed, parse_trace

    parsed = parse_trace(args.trace, format=args.format, skip_bad=args.skip_bad)
    store = SQLStore(args.db)
    session = args.session or new_id()
    created = not store.has_session(session)
    graph = ConversationGraph(store, session)
    try:
        stats = import_parsed(parsed, graph)
    except BaseException:
        if created and not store.load(session).records:
            store.delete_session(session)  # ours, and still empty: leave no trace of the attempt
        raise
    if stats.already_imported:
        console.print(f"session {graph.session}: {args.trace} already imported; nothing added")
        return 0
    console.print(
        f"session {graph.session}: {stats.messages} messages, {stats.tool_calls} tool calls, "
        f"{stats.functions} functions ({stats.format}); skipped {stats.skipped}"
    )
    for warning in stats.warnings[:20]:
        console.print(f"[yellow]warning:[/] {warning}")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from openprogram.bench import MessageCounter, Turn, format_table, load_trace, run_policy

    graph = ConversationGraph.memory() if args.memory else ConversationGraph.open(args.db)
    trace = load_trace(Path(args.trace), format=args.format, graph=graph)
    counter = MessageCounter(args.encoding)
    state = Path(args.state_dir)
    chosen = None
    if args.model:
        chosen = Policy.for_model(args.model, state_dir=state)
    budget = args.budget or (chosen.budget if chosen else 32_000)
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
            state_dir=state,
            policy_object=chosen,
        )
    if metrics is None:
        console.print(f"policy {args.policy} does not apply to {trace.name}")
        return 1
    console.print(f"session {graph.session} in {graph.store.url}")
    console.print(format_table([metrics]))
    path = records_path(state, graph.session)
    records = list(read_jsonl(path))
    table = Table(title="compactions (new decisions)")
    for column in ("tier", "fired", "tokens saved when fired"):
        table.add_column(column)
    tiers = Counter(r.tier for r in records)
    saved: Counter[str] = Counter()
    for record in records:
        saved[record.tier] += record.tokens_before - record.tokens_after
    for tier, count in tiers.items():
        table.add_row(tier, str(count), str(saved[tier]))
    console.print(table)
    console.print(f"records: {path}" if records else "no compaction was needed")
    if args.plot:
        from openprogram._plot import plot_replay

        plot_replay(Path(args.plot), trace.name, history, prompt, fired, budget)
        console.print(f"plot: {args.plot}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from openprogram.bench import (
        POLICIES,
        MessageCounter,
        format_table,
        load_trace,
        run_policy,
        to_jsonl,
        trace_files,
        trace_names,
        with_native_ratio,
    )

    inputs = [Path(p) for p in args.traces] or _default_traces()
    paths = trace_files(inputs)
    if not paths:
        raise OpenProgramError("no traces given and ../shared/traces was not found")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise OpenProgramError(f"unknown policies {unknown}; known: {', '.join(POLICIES)}")
    budgets = args.budget or [32_000]
    counter = MessageCounter(args.encoding)
    overrides = _settings(args.set)
    summarizer = None
    if args.summarizer:
        from context import LiteLLMSummarizer

        summarizer = LiteLLMSummarizer(args.summarizer)
    rows = []
    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("bench", total=len(paths) * len(policies) * len(budgets))
        for path, name in zip(paths, trace_names(inputs, paths), strict=True):
            trace = load_trace(path, name=name)
            for budget in budgets:
                for policy in policies:
                    row = run_policy(
                        trace,
                        policy,
                        budget,
                        counter,
                        anchored=args.anchored,
                        summarizer=summarizer,
                        overrides=overrides,
                    )
                    if row is not None:
                        rows.append(row)
                    progress.advance(task)
    rows = with_native_ratio(rows)
    if args.json:
        sys.stdout.write(to_jsonl(rows))
    else:
        console.print(format_table(rows))
    return 0


def _settings(pairs: Sequence[str] | None) -> dict[str, object]:
    """``--set field=value`` pairs as policy overrides (values parsed as JSON when they can)."""
    values: dict[str, object] = {}
    for pair in pairs or ():
        field, sep, text = pair.partition("=")
        if not sep or not field:
            raise OpenProgramError(f"--set {pair!r}: expected FIELD=VALUE, e.g. low_water=0.7")
        try:
            values[field.strip()] = json.loads(text)
        except json.JSONDecodeError:
            values[field.strip()] = text
    return values


def cmd_sessions(args: argparse.Namespace) -> int:
    store = SQLStore(args.db)
    table = Table(title=f"sessions in {store.url}")
    for column in ("session", "nodes", "created"):
        table.add_column(column)
    for info in store.sessions():
        table.add_row(info.id, str(info.nodes), f"{info.created:.0f}")
    console.print(table)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    graph = _existing(args.db, args.session)
    if args.node:
        node = graph.get(args.node)
        console.print_json(
            json.dumps(
                {
                    "id": node.id,
                    "kind": node.kind,
                    "seq": node.seq,
                    "payload": json.loads(_encode(node.payload)),
                    "result": json.loads(_encode(node.result)),
                    "finish": json.loads(_encode(node.finish)),
                }
            )
        )
        return 0
    tree = Tree(f"session {graph.session} ({len(graph)} nodes)")
    _tree(graph, tree, None)
    console.print(tree)
    return 0


def _encode(value: object) -> str:
    import msgspec

    return msgspec.json.encode(value).decode()


def cmd_context(args: argparse.Namespace) -> int:
    """Where the tokens of the next prompt go, by kind, and what each tier did to fit it."""
    from context import ContextEngine, TokenCounter

    graph = _existing(args.db, args.session)
    policy = Policy.for_model(args.model, state_dir=Path(args.state_dir)) if args.model else None
    policy = policy or Policy(state_dir=Path(args.state_dir))
    rendered = ContextEngine(graph, policy, budget=args.budget).render()
    counter = TokenCounter(policy.model)
    shares: Counter[str] = Counter()
    for message in rendered.messages:
        role = message["role"]
        kind = "tool outputs" if role == "tool" else f"{role} messages"
        if role == "assistant" and message.get("tool_calls"):
            kind = "assistant tool calls"
        shares[kind] += counter.count_message(message)
    table = Table(title=f"next prompt of {graph.session}: {rendered.tokens} of {rendered.budget}")
    for column in ("part", "tokens", "share of budget"):
        table.add_column(column)
    for kind, tokens in shares.most_common():
        table.add_row(kind, str(tokens), f"{tokens / rendered.budget:.1%}")
    table.add_row("history (uncompacted)", str(counter.count_messages(graph.to_openai())), "")
    console.print(table)
    _actions(rendered.actions)
    return 0


def cmd_records(args: argparse.Namespace) -> int:
    table = Table(title=f"compaction records of {args.session}")
    for column in ("time", "tier", "tokens before", "after", "ratio", "error"):
        table.add_column(column)
    for record in read_jsonl(records_path(Path(args.state_dir), args.session)):
        table.add_row(
            record.timestamp,
            record.tier,
            str(record.tokens_before),
            str(record.tokens_after),
            f"{record.ratio:.2f}",
            record.error or "",
        )
    console.print(table)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    graph = _existing(args.db, args.session)
    out = Path(args.out)
    if args.format == "graphml":
        export_graphml(graph.state, out)
    elif args.format == "json":
        export_json(graph.state, out)
    else:
        out.write_text(json.dumps(graph.to_openai(), ensure_ascii=False, indent=1))
    console.print(f"wrote {out}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    store = SQLStore(args.db)
    if not store.has_session(args.session):
        raise SessionError(f"no session {args.session!r} in {store.url}")
    delete_session(store, args.session, Path(args.state_dir))
    console.print(f"deleted session {args.session}, its records and offloaded outputs")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="openprogram", description=__doc__)
    top.add_argument(
        "--db",
        help="database path or URL (default: $OPENPROGRAM_DB or .openprogram/openprogram.db)",
    )
    sub = top.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the nested research agent offline, then show it")
    demo.add_argument("--budget", type=int, default=2_500)
    demo.add_argument("--state-dir", default=".openprogram")
    demo.set_defaults(run=cmd_demo)
    imp = sub.add_parser("import", help="import a trace into a session")
    imp.add_argument("trace")
    imp.add_argument("--session")
    imp.add_argument("--format")
    imp.add_argument("--skip-bad", action="store_true")
    imp.set_defaults(run=cmd_import)
    replay = sub.add_parser("replay", help="render every turn of a trace and report the tiers")
    replay.add_argument("trace")
    replay.add_argument("--budget", type=int, help="default: 32000, or the model's budget")
    replay.add_argument("--policy", default="default")
    replay.add_argument("--model", help="take window and tokenizer from this model's entry")
    replay.add_argument("--memory", action="store_true", help="import into memory, not SQLite")
    replay.add_argument("--plot", help="write a PNG of tokens per turn")
    replay.add_argument("--format")
    replay.add_argument("--encoding", default="cl100k_base")
    replay.add_argument("--state-dir", default=".openprogram")
    replay.set_defaults(run=cmd_replay)
    bench = sub.add_parser("bench", help="replay traces under policies and baselines")
    bench.add_argument("traces", nargs="*")
    bench.add_argument("--budget", type=int, action="append")
    bench.add_argument("--policies", default="none,native,masking,trim,claude-code,progressive")
    bench.add_argument(
        "--summarizer", help="a litellm model for our policies' summaries (default: heuristic)"
    )
    bench.add_argument(
        "--set",
        action="append",
        metavar="FIELD=VALUE",
        help="override a policy field, e.g. --set identifier_tokens=0 (repeatable)",
    )
    bench.add_argument("--encoding", default="cl100k_base")
    bench.add_argument("--json", action="store_true")
    bench.add_argument(
        "--anchored",
        action="store_true",
        help="anchor token estimates on the usage the trace recorded, and report their error",
    )
    bench.set_defaults(run=cmd_bench)
    sessions = sub.add_parser("sessions", help="list sessions")
    sessions.set_defaults(run=cmd_sessions)
    show = sub.add_parser("show", help="show a session's tree, or one node")
    show.add_argument("session")
    show.add_argument("node", nargs="?")
    show.set_defaults(run=cmd_show)
    context = sub.add_parser("context", help="token distribution of a session's next prompt")
    context.add_argument("session")
    context.add_argument("--budget", type=int)
    context.add_argument("--model")
    context.add_argument("--state-dir", default=".openprogram")
    context.set_defaults(run=cmd_context)
    records = sub.add_parser("records", help="list a session's compaction records")
    records.add_argument("session")
    records.add_argument("--state-dir", default=".openprogram")
    records.set_defaults(run=cmd_records)
    export = sub.add_parser("export", help="export a session (graphml, json, openai)")
    export.add_argument("session")
    export.add_argument("out")
    export.add_argument("--format", choices=("graphml", "json", "openai"), default="json")
    export.set_defaults(run=cmd_export)
    delete = sub.add_parser("delete", help="delete a session, its offload files and records")
    delete.add_argument("session")
    delete.add_argument("--state-dir", default=".openprogram")
    delete.set_defaults(run=cmd_delete)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.run(args))
    except (OpenProgramError, GraphError, OSError) as error:
        console.print(f"[red]error:[/] {error}")
        return 2


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
