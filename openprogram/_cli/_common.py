"""What every command shares: the console, opening stores and sessions, policies, output.

Reading commands open what exists and never create anything — no database file, no
session, no state folder, no decisions (their renders are previews). Errors are one line
(which session, which id, what to do); ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console

from context import ContextEngine, Policy, StateFolder
from graph import ConversationGraph, InvalidText, Store, check_text, is_safe_id
from openprogram import _service as service
from openprogram._errors import UsageError as UsageError  # the CLI says it where it refuses
from openprogram._reports._tables import console_width

console = Console(width=console_width(), highlight=False, soft_wrap=True)
errors = Console(stderr=True, width=console_width(), highlight=False, soft_wrap=True)


_SURROGATE = re.compile("[\ud800-\udfff]")


def session_id(text: str) -> str:
    """A ``--session`` value (argparse's ``type``): an id a session can have, so a bad one
    is a usage error that says what an id may hold. Text that is not text at all (a lone
    surrogate) passes here, so that the check of every argument names it alike."""
    if not is_safe_id(text) and not _SURROGATE.search(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} cannot be a session id: use up to 128 letters, digits, '_', '.' or "
            "'-', starting with a letter or digit (e.g. fix-bug-12)"
        )
    return text


def busy(host: str, port: int, error: OSError, option: str = "--port") -> str:
    """Why a server cannot listen on ``host:port``, and what to do (a runtime error: the
    command line was right, the port is taken)."""
    return (
        f"cannot listen on {host}:{port}: {error.strerror or error}; give another port with "
        f"{option}"
    )


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
        help="where offloaded outputs and record logs live (default: the database's own "
        "state folder, e.g. agent.db.state/ beside agent.db)",
    )
    options.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
    )
    return options


def state_dir(args: argparse.Namespace) -> Path | None:
    """The state folder ``--state-dir`` names (None: the database's own)."""
    given = getattr(args, "state_dir", None)
    return Path(given) if given else None


def folder_of(args: argparse.Namespace, store: Store) -> StateFolder:
    """The state folder of ``store``'s database (or ``--state-dir``), checked."""
    return service.folder_of(store, state_dir(args))


def open_store(args: argparse.Namespace, *, create: bool, read_only: bool = False) -> Store:
    """The database named by ``--db`` (see :func:`openprogram._service.open_store`)."""
    return service.open_store(getattr(args, "db", None), create=create, read_only=read_only)


def encoding(name: str) -> str:
    """An ``--encoding`` tiktoken knows (argparse type: anything else is a usage error)."""
    import tiktoken

    known = tiktoken.list_encoding_names()
    if name not in known:
        raise argparse.ArgumentTypeError(f"unknown encoding {name!r}; known: {', '.join(known)}")
    return name


def token_budget(text: str) -> int:
    """A ``--budget`` (argparse type): a whole number of tokens; :func:`check_budgets`
    refuses one that is not above zero, in one line, for every command alike."""
    try:
        return int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of tokens") from None


def check_budgets(args: argparse.Namespace) -> None:
    """Every command's ``--budget`` checked the same way before it runs (a replay used to
    run at 32,000 when given 0, while ``context`` refused)."""
    given = getattr(args, "budget", None)
    for value in given if isinstance(given, list) else [given]:
        if value is not None and value <= 0:
            raise UsageError(f"--budget must be positive (a number of tokens), got {value}")


PATHS = frozenset(
    {"db", "state_dir", "to", "file", "args", "out", "source", "trace", "traces", "html", "plot"}
)
"""Arguments that are file paths, a URL or a program's own arguments: bytes that are not
UTF-8 make a valid file name there, so only the other arguments are checked as text."""


def check_arguments(args: argparse.Namespace, top: argparse.ArgumentParser) -> None:
    """Every id, name and pattern given is text a database can store, checked once for
    every command: one that is not (a lone surrogate, or a byte that is not UTF-8) is a
    usage error naming the argument, not a raw ``UnicodeEncodeError`` from the driver."""
    names = _argument_names(top, getattr(args, "command", None))
    for dest, value in vars(args).items():
        if dest in PATHS:
            continue
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, str):
                try:
                    check_text(item, names.get(dest, dest))
                except InvalidText as error:
                    raise UsageError(f"{error}; ids, names and patterns are UTF-8") from None


def _argument_names(top: argparse.ArgumentParser, command: str | None) -> dict[str, str]:
    """How each destination is written on the command line (``--name``, ``session``)."""
    names: dict[str, str] = {}
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            for option in action.choices[command]._actions:
                names[option.dest] = (
                    option.option_strings[0] if option.option_strings else (option.dest)
                )
    return names


def existing_session(
    args: argparse.Namespace, session: str, *, create: bool = False, read_only: bool = False
) -> ConversationGraph:
    """A session that must exist (reading never creates one)."""
    return service.find_session(open_store(args, create=create, read_only=read_only), session)


def policy_from(args: argparse.Namespace) -> Policy:
    """The policy ``--policy`` and ``--model`` choose (claude-code for a 128k model by
    default)."""
    return service.policy_named(getattr(args, "policy", None), getattr(args, "model", None))


def what_if(args: argparse.Namespace) -> list[str]:
    """The options that ask for another configuration than the session's (a what-if)."""
    names = ("policy", "model", "budget")
    return [f"--{name}" for name in names if getattr(args, name, None) is not None]


def engine_for(args: argparse.Namespace, graph: ConversationGraph) -> ContextEngine:
    """An engine configured as the session is, or the what-if ``--policy``/``--model``/
    ``--budget`` ask for (see :func:`openprogram._service.engine_for`)."""
    return service.engine_for(
        graph,
        policy=getattr(args, "policy", None),
        model=getattr(args, "model", None),
        budget=getattr(args, "budget", None),
        state_dir=state_dir(args),
    )


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
