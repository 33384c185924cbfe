"""What every command shares: the console, opening stores and sessions, policies, output.

Reading commands open what exists and never create anything — no database file, no
session, no state folder, no decisions (their renders are previews). Errors are one line
(which session, which id, what to do); ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console

from context import ContextEngine, Policy
from graph import ConversationGraph, SQLStore, Store
from openprogram._errors import OpenProgramError, SessionError

console = Console(width=None if sys.stdout.isatty() else 220, highlight=False)
errors = Console(stderr=True, width=None if sys.stderr.isatty() else 220, highlight=False)


class UsageError(OpenProgramError):
    """A command line that does not make sense (exit code 2)."""


def common_options() -> argparse.ArgumentParser:
    """Options every subcommand takes (also accepted before the subcommand)."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--db",
        default=argparse.SUPPRESS,
        help="SQLite path or PostgreSQL URL (default: $OPENPROGRAM_DB or "
        ".openprogram/openprogram.db)",
    )
    options.add_argument(
        "--state-dir",
        default=argparse.SUPPRESS,
        help="where offloaded outputs and record logs live (default: .openprogram)",
    )
    options.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
    )
    return options


def state_dir(args: argparse.Namespace) -> Path:
    return Path(getattr(args, "state_dir", None) or ".openprogram")


def open_store(args: argparse.Namespace, *, create: bool, read_only: bool = False) -> Store:
    """The database named by ``--db``; reading commands refuse one that does not exist,
    and ``read_only`` ones open it so that nothing is written or migrated."""
    return SQLStore(getattr(args, "db", None), create=create, read_only=read_only)


def existing_session(
    args: argparse.Namespace, session: str, *, create: bool = False, read_only: bool = False
) -> ConversationGraph:
    """A session that must exist (reading never creates one)."""
    store = open_store(args, create=create, read_only=read_only)
    if not store.has_session(session):
        raise SessionError(
            f"no session {session!r} in {store.url}; `openprogram sessions` lists them"
        )
    return ConversationGraph(store, session)


def policy_from(args: argparse.Namespace) -> Policy:
    """The policy ``--policy`` and ``--model`` choose (claude-code for a 128k model by
    default), writing under ``--state-dir``."""
    name = getattr(args, "policy", None) or "claude-code"
    model = getattr(args, "model", None)
    return Policy.named(name, model, state_dir=state_dir(args))


def engine_for(args: argparse.Namespace, graph: ConversationGraph) -> ContextEngine:
    budget = getattr(args, "budget", None)
    return ContextEngine(graph, policy_from(args), budget=budget)


def print_json(value: Any) -> None:
    """Machine-readable output for ``--json``: one JSON document on stdout."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, default=str, indent=1) + "\n")


@contextmanager
def warnings_shown() -> Iterator[None]:
    """Warnings (a damaged record line, say) as one ``warning:`` line each on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for warning in caught:
        errors.print(f"[yellow]warning:[/] {warning.message}")
