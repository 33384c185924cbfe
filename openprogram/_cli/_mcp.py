"""``openprogram mcp``: the history tools over the Model Context Protocol."""

from __future__ import annotations

import argparse

from openprogram._cli._common import UsageError, common_options, open_store


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve a database's sessions to MCP clients (stdio, or streamable HTTP on 127.0.0.1)."""
    try:
        from openprogram.integrations.mcp import HistoryServer, build_server
    except ImportError as error:
        raise UsageError(
            f"the MCP server needs the mcp SDK ({error.name}): pip install 'openprogram[mcp]'"
        ) from None
    store = open_store(args, create=False)
    history = HistoryServer(store, session=args.session, allow_write=args.allow_write)
    server = build_server(history)
    if args.http is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = sub.add_parser(
        "mcp",
        parents=[common_options()],
        help="serve the history tools to MCP clients (read-only unless --allow-write)",
        description="Serve a database's sessions over the Model Context Protocol: list "
        "sessions and layers, read offloaded outputs, snipped rounds and what layers hide, "
        "search the history, see where the next prompt's tokens go.",
    )
    mcp.add_argument("--session", help="serve only this session (others are refused)")
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
    mcp.set_defaults(run=cmd_mcp)
