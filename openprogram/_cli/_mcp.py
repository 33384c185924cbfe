"""``openprogram mcp``: the history tools over the Model Context Protocol."""

from __future__ import annotations

import argparse

from rich.markup import escape

from openprogram._cli._common import (
    UsageError,
    busy,
    common_options,
    errors,
    open_store,
    session_id,
)
from openprogram._errors import OpenProgramError


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve a database's sessions to MCP clients (stdio, or streamable HTTP on 127.0.0.1)."""
    try:
        from openprogram.integrations.mcp import HistoryServer, build_server
    except ImportError as error:
        raise UsageError(
            f"the MCP server needs the mcp SDK ({error.name}): pip install 'openprogram[mcp]'"
        ) from None
    if args.http is not None:
        free_port("127.0.0.1", args.http)  # uvicorn would log a page and exit 3
    follower = None
    if args.settle < 0:
        raise UsageError(f"--settle must be 0 or more seconds, got {args.settle}")
    if args.follow:
        from openprogram._traces._follow import TraceFollower

        store = open_store(args, create=True)
        follower = TraceFollower(
            store,
            args.follow,
            session=args.session,
            on_notice=lambda message: errors.print(f"follow: {escape(message)}"),
            settle=args.settle,
        )
        follower.poll()  # a file that cannot be followed is one usage error, said once
        if follower.session is None:
            raise UsageError(f"--follow {args.follow}: {follower.error or 'no such file'}")
        follower.on_error = lambda message: errors.print(f"[yellow]follow:[/] {escape(message)}")
        follower.start()
        scope = follower.session if args.session else None
    else:
        store = open_store(args, create=False, read_only=not args.allow_write)
        scope = args.session
    history = HistoryServer(store, session=scope, allow_write=args.allow_write)
    server = build_server(history)
    try:
        if args.http is None:
            server.run("stdio")
        else:
            server.run("streamable-http", host="127.0.0.1", port=args.http)
    finally:
        if follower is not None:
            follower.stop()
    return 0


def free_port(host: str, port: int) -> None:
    """An ``OpenProgramError`` (exit 1) when another program listens on ``host:port``."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError as error:
            raise OpenProgramError(busy(host, port, error, "--http")) from error


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = sub.add_parser(
        "mcp",
        parents=[common_options()],
        help="serve the history tools to MCP clients (read-only unless --allow-write)",
        description="Serve a database's sessions over the Model Context Protocol: list "
        "sessions and layers, read offloaded outputs, snipped rounds and what layers hide, "
        "search the history, see where the next prompt's tokens go.",
    )
    mcp.add_argument(
        "--session", type=session_id, help="serve only this session (others are refused)"
    )
    mcp.add_argument(
        "--http",
        type=int,
        metavar="PORT",
        help="streamable HTTP on 127.0.0.1:PORT instead of stdio",
    )
    mcp.add_argument(
        "--allow-write",
        action="store_true",
        help="also offer the rollback and compact tools (changes layers)",
    )
    mcp.add_argument(
        "--follow",
        metavar="PATH",
        help="keep importing a growing Claude Code or Codex transcript into its session "
        "(parses only what was appended; survives the file being rewritten or rotated)",
    )
    mcp.add_argument(
        "--settle",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="with --follow: how long the file stays unchanged before a response the agent "
        "may still be writing is imported (default 10; 0: at once)",
    )
    mcp.set_defaults(run=cmd_mcp)
