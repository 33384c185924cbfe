"""What the command line, the viewer, the MCP server and the proxy all do to a database:
open its store, find a session, the session's state folder, policy and engine, and a
what-if render's engine. Plain keyword arguments: each front end parses its own options
and stays thin over these."""

from openprogram._service._database import find_session, folder_of, open_store
from openprogram._service._engines import engine_for, is_what_if, policy_named

__all__ = [
    "engine_for",
    "find_session",
    "folder_of",
    "is_what_if",
    "open_store",
    "policy_named",
]
