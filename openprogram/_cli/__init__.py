"""The ``openprogram`` command line.

Commands: demo, run, import, replay, bench, sessions, show, context, records, collapses,
compact, rollback, expand, fork, copy, export, delete, gc, check. Exit codes: 0 ok, 1 error,
2 usage. Errors are one line; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.markup import escape

from openprogram._cli import _check, _layers, _programs, _sessions, _traces
from openprogram._cli._common import UsageError, errors

__all__ = ["main", "parser", "run"]


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="openprogram", description=__doc__)
    top.add_argument("--db", help="SQLite path or PostgreSQL URL (also after the command)")
    top.add_argument("--state-dir", help="offloaded outputs and record logs (.openprogram)")
    top.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (_programs, _traces, _sessions, _layers, _check):
        module.register(sub)
    return top


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    known = type(error).__module__.split(".")[0] in ("graph", "context", "openprogram")
    return text if known else f"{type(error).__name__}: {text}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code."""
    args = parser().parse_args(argv)
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        errors.print("[red]interrupted[/]")
        return 130
    except Exception as error:
        if getattr(args, "debug", False):
            raise
        errors.print(f"[red]error:[/] {escape(_one_line(error))}")
        return 2 if isinstance(error, UsageError) else 1


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
