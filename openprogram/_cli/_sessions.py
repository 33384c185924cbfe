"""Sessions: list, show, the next prompt's token distribution, records, export, delete,
fork, copy, and garbage-collecting files no session owns."""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

import msgspec

from context import ContextStorage, delete_session, read_jsonl, records_path
from graph import (
    ConversationGraph,
    Redactor,
    StoreError,
    export_graphml,
    export_json,
    is_safe_id,
)
from openprogram._cli._common import (
    UsageError,
    common_options,
    console,
    engine_for,
    existing_session,
    open_store,
    print_json,
    state_dir,
    warnings_shown,
)
from openprogram._errors import SessionError
from openprogram._views import distribution_table, records_table, session_tree


def _plain(value: Any) -> Any:
    return json.loads(msgspec.json.encode(value))


def cmd_sessions(args: argparse.Namespace) -> int:
    try:
        store = open_store(args, create=False, read_only=True)
    except StoreError as error:
        if not str(error).startswith("no database at"):
            raise
        print_json([]) if args.json else console.print(f"no sessions ({error} yet)")
        return 0
    infos = store.sessions()
    if args.json:
        print_json(
            [
                {"id": i.id, "created": i.created, "nodes": i.nodes, "empty": not i.nodes}
                for i in infos
            ]
        )
        return 0
    from rich.table import Table

    table = Table(title=f"sessions in {store.url}")
    for column in ("session", "nodes", "created"):
        table.add_column(column)
    for info in infos:
        import datetime

        when = datetime.datetime.fromtimestamp(info.created, datetime.UTC)
        nodes = str(info.nodes) if info.nodes else "0 (empty)"
        table.add_row(info.id, nodes, when.strftime("%Y-%m-%d %H:%M:%S"))
    console.print(table)
    if any(not info.nodes for info in infos):
        console.print(
            "an empty session is what an interrupted copy or import of an older version "
            "left; `openprogram delete ID` removes it"
        )
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    graph = existing_session(args, args.session, read_only=True)
    if args.node:
        node = graph.get(args.node)
        data = {
            "id": node.id,
            "kind": node.kind,
            "seq": node.seq,
            "status": node.status,
            "payload": _plain(node.payload),
            "result": _plain(node.result),
            "finish": _plain(node.finish),
            "meta": node.meta,
            "caller": graph.state.caller.get(node.id),
            "layers": [i.id for i in graph.layers() if node.id in i.covers],
        }
        if args.json:
            print_json(data)
        else:
            console.print_json(json.dumps(data, default=str))
        return 0
    if args.json:
        print_json(
            {
                "session": graph.session,
                "nodes": [
                    {
                        "id": n.id,
                        "kind": n.kind,
                        "status": n.status,
                        "caller": graph.state.caller.get(n.id),
                        "name": getattr(n.payload, "name", None),
                        "role": n.role,
                    }
                    for n in graph.nodes()
                ],
                "layers": [
                    {"id": i.id, "kind": i.kind, "active": i.active, "covers": list(i.covers)}
                    for i in graph.layers()
                ],
                "repairs": graph.repairs,
            }
        )
        return 0
    title = f"session [bold]{graph.session}[/] ({len(graph)} nodes, {graph.store.url})"
    console.print(session_tree(graph, title=title))
    for repair in graph.repairs:
        console.print(f"[yellow]repaired on load:[/] {repair}")
    return 0


def cmd_context(args: argparse.Namespace) -> int:
    """The next prompt's tokens by part and what each tier saved (a preview: nothing is
    written, so looking never changes what the agent will send)."""
    graph = existing_session(args, args.session, read_only=True)
    engine = engine_for(args, graph)
    rendered = engine.preview()
    policy = engine.policy
    if args.json:
        counts = [engine.counter.count_message(m) for m in rendered.messages]
        print_json(
            {
                "session": graph.session,
                "window": policy.context_window,
                "budget": rendered.budget,
                "tokens": rendered.tokens,
                "messages": len(rendered.messages),
                "message_tokens": counts,
                "actions": [_plain(a) for a in rendered.actions],
            }
        )
        return 0
    title = (
        f"next prompt of {graph.session}: {rendered.tokens:,} of {rendered.budget:,} tokens "
        f"({policy.context_window:,}-token window, {policy.name})"
    )
    console.print(distribution_table(rendered, engine.counter, title=title))
    return 0


def cmd_records(args: argparse.Namespace) -> int:
    """Compaction records from the database, or from the JSONL log with ``--log``."""
    if args.log:
        path = records_path(state_dir(args), args.session)
        if not path.exists():
            raise SessionError(f"no records log at {path}")
        with warnings_shown():
            records = list(read_jsonl(path))
    else:
        graph = existing_session(args, args.session, read_only=True)
        records = ContextStorage(graph.store, graph.session, state_dir(args)).read_records()
    if args.json:
        print_json([_plain(r) for r in records])
    else:
        console.print(records_table(records, title=f"compaction records of {args.session}"))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    graph = existing_session(args, args.session, read_only=True)
    out = Path(args.out)
    if args.format == "graphml":
        export_graphml(graph.state, out)
    elif args.format == "json":
        export_json(graph.state, out)
    else:
        messages = graph.to_openai()
        if not args.no_redact:
            messages = Redactor().value(messages)
        out.write_text(json.dumps(messages, ensure_ascii=False, indent=1))
    console.print(f"wrote {out}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    graph = existing_session(args, args.session)
    delete_session(graph.store, graph.session, state_dir(args))
    console.print(f"deleted session {args.session}: nodes, layers, records, offloaded outputs")
    return 0


def cmd_fork(args: argparse.Namespace) -> int:
    graph = existing_session(args, args.session)
    graph.fork(args.node)
    console.print(f"session {graph.session}: the next append starts a branch at {args.node}")
    return 0


def cmd_copy(args: argparse.Namespace) -> int:
    from openprogram._session import open_store as open_target

    graph = existing_session(args, args.session)
    target = open_target(args.to)
    name = args.as_session or graph.session
    if target.has_session(name):
        if not target.load(name).records:
            raise SessionError(
                f"session {name!r} exists in {target.url} but is empty (an interrupted copy "
                f"of an older version); `openprogram delete {name}` removes it"
            )
        raise SessionError(f"session {name!r} already exists in {target.url}; pick --as NAME")
    if target.url == graph.store.url and name == graph.session:
        raise UsageError("copying a session onto itself; give --to another database or --as")
    copied = graph.copy_to(target, name, head=args.head)
    console.print(
        f"copied {len(copied)} nodes of {graph.session} to session {name} in {target.url}"
    )
    return 0


TMP_GRACE_SECONDS = 600


def _recent(path: Path) -> bool:
    try:
        return time.time() - path.lstat().st_mtime < TMP_GRACE_SECONDS
    except OSError:
        return False


def cmd_gc(args: argparse.Namespace) -> int:
    """Remove offload files and record logs whose session (or node) no longer exists."""
    store = open_store(args, create=False)
    folder = state_dir(args)
    sessions = {info.id for info in store.sessions()}
    doomed: list[Path] = []
    results = folder / "tool_results"
    if results.is_dir():
        for session_dir in sorted(results.iterdir()):
            if session_dir.name not in sessions or not is_safe_id(session_dir.name):
                doomed.append(session_dir)
                continue
            graph = ConversationGraph(store, session_dir.name)
            for file in sorted(session_dir.iterdir()):
                if file.suffix == ".tmp" and _recent(file):
                    continue  # a write in progress elsewhere; a killed one's is old
                if file.is_symlink() or file.suffix != ".txt" or file.stem not in graph:
                    doomed.append(file)
    logs = folder / "records"
    if logs.is_dir():
        doomed.extend(log for log in sorted(logs.glob("*.jsonl")) if log.stem not in sessions)
    if args.json:
        print_json({"removed" if not args.dry_run else "would_remove": [str(p) for p in doomed]})
    for path in doomed:
        if not args.json:
            console.print(f"{'would remove' if args.dry_run else 'removed'} {path}")
        if args.dry_run:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    if not doomed and not args.json:
        console.print("nothing to remove")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = common_options()
    sessions = sub.add_parser("sessions", parents=[common], help="list sessions")
    sessions.add_argument("--json", action="store_true")
    sessions.set_defaults(run=cmd_sessions)
    show = sub.add_parser(
        "show",
        parents=[common],
        help="a session's tree (layers, running and interrupted functions marked), or one node",
    )
    show.add_argument("session")
    show.add_argument("node", nargs="?")
    show.add_argument("--json", action="store_true")
    show.set_defaults(run=cmd_show)
    context = sub.add_parser(
        "context", parents=[common], help="where the next prompt's tokens go (writes nothing)"
    )
    context.add_argument("session")
    context.add_argument("--budget", type=int)
    context.add_argument("--model")
    context.add_argument("--policy", choices=("claude-code", "progressive"))
    context.add_argument("--json", action="store_true")
    context.set_defaults(run=cmd_context)
    records = sub.add_parser("records", parents=[common], help="a session's compaction records")
    records.add_argument("session")
    records.add_argument("--log", action="store_true", help="read the JSONL log instead")
    records.add_argument("--json", action="store_true")
    records.set_defaults(run=cmd_records)
    export = sub.add_parser(
        "export", parents=[common], help="export a session (graphml, json, openai)"
    )
    export.add_argument("session")
    export.add_argument("out")
    export.add_argument("--format", choices=("graphml", "json", "openai"), default="json")
    export.add_argument(
        "--no-redact", action="store_true", help="keep secrets (keys, tokens) in the export"
    )
    export.set_defaults(run=cmd_export)
    delete = sub.add_parser(
        "delete", parents=[common], help="delete a session with its layers, records and files"
    )
    delete.add_argument("session")
    delete.set_defaults(run=cmd_delete)
    fork = sub.add_parser("fork", parents=[common], help="start a branch of a session at a node")
    fork.add_argument("session")
    fork.add_argument("node")
    fork.set_defaults(run=cmd_fork)
    copy = sub.add_parser(
        "copy", parents=[common], help="copy a session (or one branch) to another database"
    )
    copy.add_argument("session")
    copy.add_argument("--to", required=True, help="the target SQLite path or PostgreSQL URL")
    copy.add_argument("--as", dest="as_session", help="the copy's session id (default: same)")
    copy.add_argument("--head", help="copy only the branch that ends at this node")
    copy.set_defaults(run=cmd_copy)
    gc = sub.add_parser(
        "gc", parents=[common], help="remove offload files and logs no session owns"
    )
    gc.add_argument("--dry-run", action="store_true")
    gc.add_argument("--json", action="store_true")
    gc.set_defaults(run=cmd_gc)
