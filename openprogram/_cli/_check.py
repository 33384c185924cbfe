"""``openprogram check [SESSION]``: read every session (or one) as a repair would, and say
what a damaged database leaves unreadable: nothing is skipped silently, nothing is written."""

from __future__ import annotations

import argparse

from graph import ConversationGraph, StoreError
from openprogram._cli._common import common_options, console, open_store, print_json
from openprogram._errors import SessionError
from openprogram._words import counted


def cmd_check(args: argparse.Namespace) -> int:
    """Exit 0 when every session reads whole, 1 when something was skipped or unreadable."""
    store = open_store(args, create=False, read_only=True)
    if args.session is not None:
        if not store.has_session(args.session):
            raise SessionError(f"no session {args.session!r} in {store.url}")
        names = [args.session]
    else:
        names = [info.id for info in store.sessions()]
    report: list[dict[str, object]] = []
    for name in names:
        problems: list[str] = []
        nodes = 0
        try:
            graph = ConversationGraph(store, name, repair=True)
            problems.extend(graph.repairs)
            nodes = len(graph)
            store.session_meta(name)
        except StoreError as error:
            problems.append(" ".join(str(error).split()))
        report.append({"session": name, "nodes": nodes, "problems": problems})
    damaged = [entry for entry in report if entry["problems"]]
    if args.json:
        print_json({"database": store.url, "sessions": report, "damaged": len(damaged)})
        return 1 if damaged else 0
    for entry in report:
        found: list[str] = entry["problems"]  # type: ignore[assignment]
        readable = counted(int(entry["nodes"]), "node")  # type: ignore[call-overload]
        if not found:
            console.print(f"{entry['session']}: ok ({readable})")
            continue
        console.print(
            f"[red]{entry['session']}: {counted(len(found), 'problem')}[/], {readable} readable"
        )
        for problem in found:
            console.print(f"  {problem}", markup=False)
    summary = f"{counted(len(report), 'session')} checked in {store.url}, {len(damaged)} damaged"
    console.print(summary, markup=False)
    return 1 if damaged else 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = sub.add_parser(
        "check",
        parents=[common_options()],
        help="read every session (or one) and report what a damaged database cannot give back",
    )
    check.add_argument("session", nargs="?")
    check.add_argument("--json", action="store_true")
    check.set_defaults(run=cmd_check)
