"""Sessions: list, show, the next prompt's token distribution, records, export, delete,
fork, copy, and garbage-collecting files no session owns."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import msgspec
from rich.markup import escape

from context import (
    ContextStorage,
    collect_garbage,
    delete_session,
    read_jsonl,
    records_path,
)
from graph import (
    ConversationGraph,
    NoDatabase,
    Redactor,
    Store,
    StoreError,
    node_handle,
    resolve_ref,
    scrub,
)
from openprogram._cli._common import (
    UsageError,
    common_options,
    console,
    engine_for,
    errors,
    existing_session,
    folder_of,
    open_store,
    print_json,
    session_id,
    token_budget,
    warnings_shown,
    what_if,
)
from openprogram._errors import SessionError
from openprogram._reports._prompts import context_report, prompts
from openprogram._reports._views import (
    distribution_table,
    fired_by_frame,
    records_table,
    session_tree,
)
from openprogram._words import counted


def _plain(value: Any) -> Any:
    return json.loads(msgspec.json.encode(value))


def cmd_sessions(args: argparse.Namespace) -> int:
    try:
        store = open_store(args, create=False, read_only=True)
    except NoDatabase as error:
        print_json([]) if args.json else console.print(f"no sessions ({error} yet)")
        return 0
    infos = store.sessions()
    if args.json:
        print_json(
            [
                {
                    "id": i.id,
                    "created": i.created.isoformat(),
                    "nodes": i.nodes,
                    "empty": not i.nodes,
                }
                for i in infos
            ]
        )
        return 0
    from openprogram._reports._tables import Grid

    table = Grid(f"sessions in {store.url}")
    table.column("session", "id", key=True)
    table.column("nodes", "number")
    table.column("created (UTC)", "id")
    for info in infos:
        nodes = f"{info.nodes:,}" if info.nodes else "0 (empty)"
        table.row(info.id, nodes, info.created.strftime("%Y-%m-%d %H:%M:%S"))
    console.print(table)
    if any(not info.nodes for info in infos):
        console.print(
            "an empty session is what an interrupted copy or import of an older version "
            "left; `openprogram delete ID` removes it"
        )
    return 0


def _branches(graph: ConversationGraph) -> dict[str, str | None]:
    """The session's named branches (only main on a database older than named branches)."""
    try:
        return graph.branches_by_name()
    except StoreError:
        return {"main": graph.head}


def cmd_show(args: argparse.Namespace) -> int:
    graph = existing_session(args, args.session, read_only=True)
    if args.node:
        node = graph.get(args.node)  # an id or a handle (n42, fn_42)
        data = {
            "id": node.id,
            "handle": node_handle(node),
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
                "branches": _branches(graph),
            }
        )
        return 0
    title = f"session [bold]{graph.session}[/] ({counted(len(graph), 'node')}, {graph.store.url})"
    try:
        storage = ContextStorage(graph.store, graph.session, folder_of(args, graph.store))
        records = storage.read_records()
    except StoreError as error:  # a database older than the records: the tree without them
        errors.print(f"[yellow]warning:[/] no compaction records shown: {escape(str(error))}")
        records = []
    fired = fired_by_frame(graph, records)
    branches = _branches(graph)
    console.print(session_tree(graph, title=title, fired=fired, heads=branches))
    if len(branches) > 1:
        heads = ", ".join(f"{name} at {head}" for name, head in branches.items())
        console.print(f"branches: {heads}")
    console.print(
        f"[dim]show {graph.session} NODE shows one node; tiers under a function are the "
        f"compactions of its own prompts ({counted(len(records), 'record')}: openprogram records "
        f"{graph.session})[/]"
    )
    for repair in graph.repairs:
        console.print(f"[yellow]repaired on load:[/] {repair}")
    return 0


def cmd_context(args: argparse.Namespace) -> int:
    """The last prompt the agent sent, as its receipt recorded it, and the next one, each
    labelled (``openprogram._reports._prompts``: the MCP ``context`` tool reports the same), under
    the session's stored configuration. ``--policy``/``--model``/``--budget`` make it a
    what-if preview of the next prompt instead, marked as such. Nothing is written."""
    graph = existing_session(args, args.session, read_only=True)
    engine = engine_for(args, graph)
    asked = what_if(args)
    found = prompts(graph, engine, receipts=not asked)
    receipt = found.last
    policy = engine.policy
    source = "receipt" if receipt is not None else "what-if" if asked else "configuration"
    if args.json:
        report = context_report(graph, found, engine.counter)
        shown = report["next"] if receipt is None else report["last_sent"]["shown"] or {}
        print_json(
            {
                **report,
                "source": source,
                "what_if": asked,
                "window": policy.context_window,
                "message_tokens": shown.get("message_tokens", []),
                "actions": shown.get("actions", []),
                "receipt": None if receipt is None else _plain(receipt),
            }
        )
        return 0
    window = f"{policy.context_window:,}-token window, {policy.name}"
    upcoming = found.next
    if receipt is not None:
        where = "" if receipt.frame is None else f" in function {receipt.frame}"
        console.print(
            f"last prompt sent{where} (receipt {receipt.id}, {receipt.at or 'time unknown'}): "
            f"{receipt.tokens:,} of {receipt.budget:,} tokens, {receipt.messages} messages"
        )
        if found.again is None:
            console.print(
                "[dim]its layers changed since (a rollback or a compaction), so it cannot be "
                "shown again as sent; the figures above are the receipt's[/]"
            )
        else:
            how = "exactly as sent" if found.exact else "rendered again from its receipt"
            console.print(
                distribution_table(found.again, engine.counter, title=f"last prompt, {how}")
            )
        added = graph.last_seq - receipt.seq
        since = f", {counted(added, 'record')} stored since the last one was sent"
    else:
        since = ", none sent yet" if not asked else ""
    label = (
        f"WHAT-IF preview ({' '.join(asked)}), not the session's configuration: " if asked else ""
    )
    title = (
        f"{label}next prompt of {graph.session}: {upcoming.tokens:,} of {upcoming.budget:,} "
        f"tokens, {counted(len(upcoming.messages), 'message')} ({window}{since})"
    )
    console.print(distribution_table(upcoming, engine.counter, title=title))
    return 0


def cmd_records(args: argparse.Namespace) -> int:
    """Compaction records from the database, or from the JSONL log with ``--log``."""
    if args.log:
        store = open_store(args, create=False)
        path = records_path(folder_of(args, store).path, args.session)
        if not path.exists():
            raise SessionError(f"no records log at {path}")
        with warnings_shown():
            records = list(read_jsonl(path))
    else:
        graph = existing_session(args, args.session, read_only=True)
        records = ContextStorage(
            graph.store, graph.session, folder_of(args, graph.store)
        ).read_records()
    if args.json:
        print_json([_plain(r) for r in records])
    else:
        console.print(records_table(records, title=f"compaction records of {args.session}"))
    return 0


def redacted(graph: ConversationGraph) -> ConversationGraph:
    """An in-memory copy of ``graph`` with every known secret format redacted in every
    record (messages, function inputs, outputs and errors, meta, layers)."""
    copy = graph.clone()
    scrub(copy.store, copy.session, Redactor(), vacuum=False)
    return ConversationGraph(copy.store, copy.session)


CACHES = ("context.tokens.",)
"""Side values an export leaves out: token counts, which any reader counts again."""


def exported_side(store: Store, session: str) -> dict[str, Any]:
    """What an export carries beside the records: every side namespace the session holds
    (tier state, receipts, configuration events, a framework adapter's items and mirror
    index, whatever package wrote them), the token-count caches left out."""
    from graph import session_side

    values, logs = store.side_namespaces(session)
    kept = [name for name in values if not name.startswith(CACHES)]
    return session_side(store, session, values=kept, logs=logs)


def cmd_export(args: argparse.Namespace) -> int:
    """A session to a file: the whole session (JSON or GraphML, by the extension, which
    ``openprogram import`` loads back): its records, configuration, branches, layers,
    compaction records, tier state and render receipts, so that the session loaded
    elsewhere renders the same prompts; or the OpenAI messages of its main branch."""
    from graph import export_format, export_session

    graph = existing_session(args, args.session, read_only=True)
    out = Path(args.out)
    if not out.parent.is_dir():
        raise UsageError(f"no folder {out.parent} for {out}")
    chosen = args.format or export_format(out)
    side = exported_side(graph.store, graph.session)
    if not args.no_redact:
        graph = redacted(graph)  # every record, function inputs and errors included
        side = Redactor().value(side)
    if chosen == "openai":
        out.write_text(json.dumps(graph.to_openai(), ensure_ascii=False))
    else:
        export_session(
            graph.state, out, head=graph.head, format=export_format(f"x.{chosen}"), side=side
        )
    secrets = "" if args.no_redact else " (secrets redacted; --no-redact keeps them)"
    console.print(f"wrote {out}{secrets}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    graph = existing_session(args, args.session)
    with warnings_shown():
        delete_session(graph.store, graph.session, folder_of(args, graph.store).path)
    console.print(f"deleted session {args.session}: nodes, layers, records, offloaded outputs")
    return 0


def cmd_fork(args: argparse.Namespace) -> int:
    """A new named branch at a node; the session's main head stays where it is."""
    graph = existing_session(args, args.session)
    args.node = resolve_ref(graph.state, args.node) or args.node  # an id or a handle (n42)
    if args.node not in graph:
        raise SessionError(
            f"no node {args.node!r} in session {graph.session}; `openprogram show "
            f"{graph.session}` prints node ids"
        )
    branches = graph.branches_by_name()
    name = args.name or next(f"fork-{n}" for n in range(1, len(branches) + 2)
                             if f"fork-{n}" not in branches)  # fmt: skip
    graph.create_branch(name, at=args.node)
    console.print(
        f"session {graph.session}: branch {name} starts at {args.node}; main stays at "
        f"{branches['main']} (`openprogram checkout {graph.session} {name}` moves the session "
        "to the branch)"
    )
    return 0


def cmd_checkout(args: argparse.Namespace) -> int:
    """Move the session's main head to a branch's head or a node, keeping where it was as a
    branch of its own, so a checkout can always be undone."""
    graph = existing_session(args, args.session)
    branches = graph.branches_by_name()
    target = branches.get(args.target) if args.target != "main" else branches["main"]
    if target is None:
        if args.target not in graph:
            known = ", ".join(branches)
            raise SessionError(
                f"{args.target!r} is neither a branch ({known}) nor a node of session "
                f"{graph.session}"
            )
        target = args.target
    before = branches["main"]
    kept = ""
    others = [head for name, head in branches.items() if name != "main"]
    if before is not None and before != target and before not in others:
        name = next(f"main-{n}" for n in range(1, len(branches) + 2)
                    if f"main-{n}" not in branches)  # fmt: skip
        graph.create_branch(name, at=before)
        kept = f"; where it was is kept as branch {name}"
    if target != before:
        graph.fork(target)
    console.print(f"session {graph.session}: main is now at {target}{kept}")
    return 0


def cmd_copy(args: argparse.Namespace) -> int:
    from graph import open_store as open_target

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
    head = None if args.head is None else resolve_ref(graph.state, args.head) or args.head
    copied = graph.copy_to(target, name, head=head)
    console.print(
        f"copied {counted(len(copied), 'node')} of {graph.session} to session {name} in "
        f"{target.url}"
    )
    return 0


def cmd_gc(args: argparse.Namespace) -> int:
    """Remove offload files and record logs whose session (or node) no longer exists,
    never following a link; ``--dry-run`` lists exactly what a real run removes."""
    store = open_store(args, create=False)
    report = collect_garbage(store, folder_of(args, store).path, dry_run=args.dry_run)
    removed = [str(path) for path in report.removed]
    if args.json:
        print_json(
            {"would_remove" if args.dry_run else "removed": removed, "refused": report.refused}
        )
    else:
        for path in removed:
            console.print(f"{'would remove' if args.dry_run else 'removed'} {escape(path)}")
        if not removed:
            console.print("nothing to remove")
    for refusal in report.refused:
        errors.print(f"[yellow]refused:[/] {escape(refusal)}")
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
    context.add_argument("--budget", type=token_budget)
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
        "export",
        parents=[common],
        help="export a session: .json or .graphml (loadable with import), or --format openai",
    )
    export.add_argument("session", help="the session id")
    export.add_argument("out", help="the file to write; .json or .graphml sets the format")
    export.add_argument(
        "--format",
        choices=("graphml", "json", "openai"),
        help="json or graphml: every node, event and layer (default: from the extension); "
        "openai: the main branch as chat messages",
    )
    export.add_argument(
        "--no-redact", action="store_true", help="keep secrets (keys, tokens) in the export"
    )
    export.set_defaults(run=cmd_export)
    delete = sub.add_parser(
        "delete", parents=[common], help="delete a session with its layers, records and files"
    )
    delete.add_argument("session")
    delete.set_defaults(run=cmd_delete)
    fork = sub.add_parser(
        "fork",
        parents=[common],
        help="start a named branch of a session at a node (the session's head stays)",
    )
    fork.add_argument("session", help="the session")
    fork.add_argument("node", help="the node the branch starts after")
    fork.add_argument("--name", help="the branch's name (default fork-1, fork-2, …)")
    fork.set_defaults(run=cmd_fork)
    checkout = sub.add_parser(
        "checkout",
        parents=[common],
        help="move a session's head to a branch or a node (where it was is kept as a branch)",
    )
    checkout.add_argument("session", help="the session")
    checkout.add_argument("target", help="a branch name (see `show`) or a node id")
    checkout.set_defaults(run=cmd_checkout)
    copy = sub.add_parser(
        "copy", parents=[common], help="copy a session (or one branch) to another database"
    )
    copy.add_argument("session")
    copy.add_argument("--to", required=True, help="the target SQLite path or PostgreSQL URL")
    copy.add_argument(
        "--as", dest="as_session", type=session_id, help="the copy's session id (default: same)"
    )
    copy.add_argument("--head", help="copy only the branch that ends at this node")
    copy.set_defaults(run=cmd_copy)
    gc = sub.add_parser(
        "gc", parents=[common], help="remove offload files and logs no session owns"
    )
    gc.add_argument("--dry-run", action="store_true")
    gc.add_argument("--json", action="store_true")
    gc.set_defaults(run=cmd_gc)
