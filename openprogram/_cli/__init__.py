"""The openprogram command line: agent sessions stored as a graph, rendered under a budget.

Start with `openprogram demo`. Exit codes: 0 ok, 1 error, 2 usage. Errors are one line;
--debug shows the traceback.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from collections.abc import Sequence

from rich.markup import escape

from openprogram._cli import (
    _bench,
    _check,
    _configure,
    _layers,
    _mcp,
    _programs,
    _proxy,
    _scrub,
    _sessions,
    _traces,
    _view,
)
from openprogram._cli._common import UsageError, check_arguments, check_budgets, errors

__all__ = ["main", "parser", "run"]


HELP = {
    "json": "print JSON instead of a table",
    "session": "a session id (`openprogram sessions` lists them)",
    "node": "a node id (`openprogram show SESSION` prints them)",
    "layer": "a layer id (`openprogram collapses SESSION` lists them)",
    "budget": "the prompt's token budget (default: the session's, else the model's)",
    "model": "a litellm model name: its context window and tokenizer",
    "policy": "the compaction preset",
    "encoding": "the tiktoken encoding that counts tokens",
    "reason": "why, kept in the rollback's record",
    "depth": "1 shows nested functions by input and output; 2 or more opens them",
    "dry_run": "say what would be removed, remove nothing",
    "trace": "a trace file (Claude Code, Codex, OpenAI messages, SWE-agent, mini-swe-agent)",
    "traces": "trace files or folders (default: ../shared/traces when found)",
    "format": "the trace format (default: detected from the file)",
}
"""Help for options a command left without any, by destination: every option has help."""


def _fill_help(top: argparse.ArgumentParser) -> None:
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                for option in command._actions:
                    if option.help is None and option.dest in HELP:
                        option.help = HELP[option.dest]


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="openprogram", description=__doc__)
    top.add_argument("--db", help="SQLite path or PostgreSQL URL (also after the command)")
    top.add_argument("--state-dir", help="offloaded outputs and record logs (.openprogram)")
    top.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (
        _programs,
        _traces,
        _bench,
        _sessions,
        _configure,
        _layers,
        _scrub,
        _check,
        _mcp,
        _view,
        _proxy,
    ):
        module.register(sub)
    _fill_help(top)
    return top


_DRIVER = re.compile(r"^\((?:[a-z_][\w]*\.)+\w+\)\s*")
"""A database driver's exception class in brackets: ``(sqlite3.OperationalError)``."""
_BACKGROUND = re.compile(r"\s*\(Background on this error at: [^)]*\)")
"""SQLAlchemy's link to its error page."""
ERROR_CHARS = 300
"""An error line longer than this is cut (``--debug`` shows the whole error)."""


def one_line(error: BaseException) -> str:
    """An error as one short line in plain words: no exception class names, no SQL, no
    parameter dumps (a database error repeats every row it tried to write)."""
    if isinstance(error, OSError) and error.strerror:
        text = f"{error.strerror}: {error.filename}" if error.filename else error.strerror
    else:
        text = " ".join(str(error).split())
    text = text.split(" [SQL: ")[0]
    text = _BACKGROUND.sub("", _DRIVER.sub("", text)).strip()
    if text == "database is locked":
        text = "the database is locked by another process; try again when it is done"
    if not text:
        text = f"unexpected {type(error).__name__}; --debug shows where"
    if len(text) > ERROR_CHARS:
        text = text[:ERROR_CHARS].rstrip() + " … (--debug shows all of it)"
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code."""
    top = parser()
    args = top.parse_args(argv)
    formatting = warnings.formatwarning
    warnings.formatwarning = _warning_line
    try:
        check_arguments(args, top)
        check_budgets(args)
        return int(args.run(args))
    except KeyboardInterrupt:
        errors.print("[red]interrupted[/]")
        return 130
    except Exception as error:
        if getattr(args, "debug", False):
            raise
        errors.print(f"[red]error:[/] {escape(one_line(error))}")
        return 2 if isinstance(error, UsageError) else 1
    finally:
        warnings.formatwarning = formatting


def _warning_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    line: str | None = None,
) -> str:
    """A warning shown as the command's one ``warning:`` line (not a source location)."""
    return f"warning: {message}\n"


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
