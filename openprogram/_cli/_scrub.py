"""``openprogram scrub``: remove a secret already stored in a session, everywhere."""

from __future__ import annotations

import argparse
import re

from context import scrub_session
from graph import Redactor
from openprogram._cli._common import (
    UsageError,
    common_options,
    console,
    existing_session,
    print_json,
    state_dir,
)
from openprogram._words import counted


def patterns_from(args: argparse.Namespace) -> dict[str, str] | Redactor:
    """``{label: regex}`` from ``--pattern`` (``--literal``: the text as given), or every
    known key format with ``--known``."""
    given = list(args.pattern or [])
    if args.known:
        if given:
            raise UsageError("give --pattern or --known, not both")
        return Redactor()
    if not given:
        raise UsageError("say what to scrub: --pattern REGEX (repeatable) or --known")
    labels = list(args.label or [])
    if len(labels) > len(given):
        raise UsageError("more --label than --pattern options")
    labels += [f"pattern-{i}" for i in range(len(labels) + 1, len(given) + 1)]
    chosen: dict[str, str] = {}
    for label, pattern in zip(labels, given, strict=True):
        text = re.escape(pattern) if args.literal else pattern
        try:
            re.compile(text)
        except re.error as error:
            raise UsageError(f"--pattern for {label!r} does not compile: {error}") from None
        chosen[label] = text
    return chosen


def cmd_scrub(args: argparse.Namespace) -> int:
    chosen = patterns_from(args)
    graph = existing_session(args, args.session)
    report = scrub_session(
        graph.store, graph.session, chosen, state_dir(args), vacuum=not args.no_vacuum
    )
    if args.json:
        print_json(
            {
                "session": report.session,
                "labels": list(report.labels),
                "rows": report.rows,
                "files": list(report.files),
                "replaced": report.replaced,
                "vacuumed": report.vacuumed,
                "residues": list(report.residues),
            }
        )
        return 0
    rows = ", ".join(f"{count} {table}" for table, count in report.rows.items()) or "no rows"
    console.print(
        f"scrubbed session {report.session}: {report.replaced} match(es) of "
        f"{', '.join(report.labels)} in {rows} and {counted(len(report.files), 'file')}"
        + (f"; {report.vacuumed}" if report.vacuumed else "")
    )
    for path in report.files:
        console.print(f"  rewrote {path}", markup=False, highlight=False)
    console.print("what the scrub cannot reach (the old text may still be there):")
    for residue in report.residues:
        console.print(f"  - {residue}", markup=False, highlight=False, soft_wrap=True)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    scrub = sub.add_parser(
        "scrub",
        parents=[common_options()],
        help="remove a stored secret from a session's rows and files (audited)",
        description="Rewrite what the patterns match in the session's stored rows and its "
        "offload and record files to [REDACTED:<label>], vacuum the database so no free "
        "page keeps the old bytes, and log an audit entry (labels and counts, never the "
        "secret). Processes that have the session open (an agent, openprogram mcp, view, "
        "follow) read it afresh before their next prompt or answer. The report ends with "
        "what a scrub cannot reach: a server's write-ahead log and archives, replicas, "
        "backups and copies, exports, prompts already sent.",
    )
    scrub.add_argument("session")
    scrub.add_argument("--pattern", action="append", help="a regex to scrub (repeatable)")
    scrub.add_argument(
        "--label", action="append", help="the name the audit gives each --pattern, in order"
    )
    scrub.add_argument("--literal", action="store_true", help="patterns are plain text")
    scrub.add_argument("--known", action="store_true", help="every known key and token format")
    scrub.add_argument("--no-vacuum", action="store_true", help="skip the VACUUM")
    scrub.add_argument("--json", action="store_true")
    scrub.set_defaults(run=cmd_scrub)
