"""The history tools over the Model Context Protocol (``openprogram mcp``).

A server built on the official ``mcp`` SDK (``openprogram[mcp]``) that lets any MCP client —
Claude Code, an IDE, another agent — read a stored session the way our own runtime's model
does: list sessions and layers, read offloaded outputs, snipped rounds, what a layer or a
finished function hides, search the whole history, and see where the next prompt's tokens
go. Resources give a session's rendered prompt and its compaction records.

It is read-only towards the model: no tool changes a layer unless ``allow_write`` adds
``rollback`` and ``compact``. Every tool-level failure — an unknown id, a bound the input
schema declares (``offset``, ``limit``, ``depth``, the query's length) — is a tool result
with ``isError`` (SEP-1303), so the model reads the message and tries again; a resource
that cannot be read is a protocol error. ``session`` binds the server to one session:
anything outside it is "not found", as if the database held nothing else, and no answer
names another session or shows its text or ids.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import Annotated, Any

import msgspec
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from pydantic import Field

from context import ContextError, Policy
from graph import (
    ConversationGraph,
    GraphError,
    InvalidText,
    Store,
    check_text,
    layer_handle,
    open_store,
)
from openprogram._reports._prompts import context_report, prompts
from openprogram._runtime._history import READ_LIMIT, HistoryTools

__all__ = ["MAX_QUERY_CHARS", "HistoryServer", "build_server"]

MAX_QUERY_CHARS = 2_000
"""A longer search query is refused as an oversized request."""
MAX_RESULTS = 200
MAX_DEPTH = 32

Offset = Annotated[int, Field(ge=0, description="the first character to return")]
Limit = Annotated[int, Field(ge=1, le=READ_LIMIT, description="how many characters at most")]
Depth = Annotated[int, Field(ge=1, le=MAX_DEPTH, description="1: nested functions closed")]
Results = Annotated[int, Field(ge=1, le=MAX_RESULTS, description="how many matches at most")]
Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)]


class _Reader:
    """What the history tools need of a session (its graph and engine, configured as the
    session stored it), opened for reading: nothing is marked, leased or migrated by
    looking."""

    def __init__(self, store: Store, session: str, policy: Policy | None) -> None:
        from openprogram._runtime._config import stored_engine

        self.graph = ConversationGraph(store, session)
        budget = None if policy is None else policy.budget  # a given policy brings its own
        self.engine = stored_engine(self.graph, policy=policy, budget=budget)
        self.id = session
        self.history = HistoryTools(self)

    @property
    def policy(self) -> Policy:
        return self.engine.policy


class HistoryServer:
    """The sessions of one database, served to MCP clients (see the module docstring)."""

    def __init__(
        self,
        db: str | os.PathLike[str] | Store,
        *,
        session: str | None = None,
        allow_write: bool = False,
        policy: Policy | None = None,
    ) -> None:
        self.store = db if isinstance(db, Store) else open_store(db, create=False)
        self.scope = session
        self.allow_write = allow_write
        self.policy = policy
        """None: each session's own stored configuration."""
        self._readers: dict[str, _Reader] = {}
        self._lock = threading.RLock()
        if session is not None and not self.store.has_session(session):
            raise ValueError(f"no session {session!r} in {self.store.url}")

    # -- scoping ---------------------------------------------------------------------------
    def reader(self, session: str | None) -> _Reader:
        """The session a call names (the scoped one when it names none), caught up with what
        its writers appended since the last call. Outside the scope a session is unknown."""
        name = session or self.scope
        if name is None:
            raise ToolError("name a session: list_sessions lists them")
        try:
            check_text(name, "session")
        except InvalidText as error:
            raise ToolError(str(error)) from None
        known = name == self.scope or (self.scope is None and self.store.has_session(name))
        if not known:
            raise ToolError(f"no session {name!r}; list_sessions lists them")
        with self._lock:
            reader = self._readers.get(name)
            if reader is None:
                reader = self._readers[name] = _Reader(self.store, name, self.policy)
            else:
                reader.graph.refresh()
            return reader

    def _history(self, session: str | None, ref: str, call: Callable[[HistoryTools], str]) -> str:
        reader = self.reader(session)
        with self._lock:
            try:
                return call(reader.history)
            except (ValueError, KeyError, ContextError, GraphError) as error:
                raise ToolError(self._said(error, ref)) from error

    def _said(self, error: BaseException, ref: str) -> str:
        """What a failure tells the client: its message, unless the server is bound to a
        session and the message names another one (``ref``, an id of another session, is
        then simply not found here)."""
        message = " ".join(str(error).split())
        if self.scope is None:
            return message
        if "belongs to" in message or any(
            info.id != self.scope and repr(info.id) in message for info in self.store.sessions()
        ):
            return f"{ref!r} is not found in this session; list_layers and search_history list ids"
        return message

    # -- tools -----------------------------------------------------------------------------
    def list_sessions(self) -> str:
        """The sessions this server reads: id, node count and creation time, as JSON."""
        found = [
            {"id": info.id, "nodes": info.nodes, "created": info.created.isoformat()}
            for info in self.store.sessions()
            if self.scope is None or info.id == self.scope
        ]
        return json.dumps(found)

    def list_layers(self, session: str | None = None, active_only: bool = False) -> str:
        """A session's layers (collapses, compactions), oldest first, as JSON lines.

        Args:
            session: the session id (optional when the server serves one session)
            active_only: only the layers that still apply
        """
        reader = self.reader(session)
        layers = reader.engine.layers(active=True if active_only else None)
        lines = [
            json.dumps(
                {
                    "id": info.id,
                    "handle": layer_handle(info),
                    "kind": info.kind,
                    "active": info.active,
                    "covers": len(info.covers),
                    "first": info.covers[0] if info.covers else None,
                    "last": info.covers[-1] if info.covers else None,
                    "at": info.at.isoformat(),
                }
            )
            for info in layers
        ]
        return "\n".join(lines) or "no layers"

    def inspect_node(self, id: str, session: str | None = None) -> str:
        """One node of the conversation graph: kind, status, content and links.

        Args:
            id: the node id (as placeholders and notes name it)
            session: the session id (optional when the server serves one session)
        """
        return self._history(session, id, lambda tools: tools.inspect_node(id))

    def read_output(
        self, id: str, session: str | None = None, offset: Offset = 0, limit: Limit = READ_LIMIT
    ) -> str:
        """The full text of a node (an offloaded, reduced or cleared output, a function's
        output, a message) from ``offset``, at most ``limit`` characters.

        Args:
            id: the node id a placeholder names
            session: the session id (optional when the server serves one session)
            offset: the first character to return
            limit: how many characters to return at most
        """
        _check_page(offset, limit)
        return self._history(session, id, lambda tools: tools.read_output(id, offset, limit))

    def read_history(
        self, first: str, last: str, session: str | None = None, offset: Offset = 0
    ) -> str:
        """Earlier rounds removed to fit the context, from node ``first`` to ``last``.

        Args:
            first: the first node id the removal note names
            last: the last node id the removal note names
            session: the session id (optional when the server serves one session)
            offset: the first character to return
        """
        _check_page(offset, READ_LIMIT)
        return self._history(
            session, f"{first}..{last}", lambda tools: tools.read_history(first, last, offset)
        )

    def expand_layer(self, id: str, session: str | None = None, offset: Offset = 0) -> str:
        """The original messages under a collapse or compaction layer.

        Args:
            id: the layer id its summary names
            session: the session id (optional when the server serves one session)
            offset: the first character to return
        """
        _check_page(offset, READ_LIMIT)
        return self._history(session, id, lambda tools: tools.expand_layer(id, offset))

    def expand_function(
        self, id: str, session: str | None = None, depth: Depth = 1, offset: Offset = 0
    ) -> str:
        """A finished function's internals, as they were seen inside it while it ran.

        Args:
            id: the function node id
            session: the session id (optional when the server serves one session)
            depth: 1 shows nested functions by input and output, 2 or more opens them
            offset: the first character to return
        """
        _check_page(offset, READ_LIMIT)
        if not 1 <= depth <= MAX_DEPTH:
            raise ToolError(f"depth must be between 1 and {MAX_DEPTH}, not {depth}")
        return self._history(session, id, lambda tools: tools.expand_function(id, depth, offset))

    def search_history(self, query: Query, session: str | None = None, limit: Results = 20) -> str:
        """Search the whole session — collapsed, snipped and offloaded parts included — for
        nodes whose text holds every word of ``query``; newest first.

        Args:
            query: words to find (case-insensitive)
            session: the session id (optional when the server serves one session)
            limit: how many matches to list at most
        """
        if len(query) > MAX_QUERY_CHARS:
            raise ToolError(f"query of {len(query):,} characters (at most {MAX_QUERY_CHARS:,})")
        if not 1 <= limit <= MAX_RESULTS:
            raise ToolError(f"limit must be between 1 and {MAX_RESULTS}, not {limit}")
        return self._history(session, query, lambda tools: tools.search_history(query, limit))

    def context(self, session: str | None = None) -> str:
        """The last prompt the session sent (exactly as sent, from its receipt) and the next
        one it would send (a preview: nothing is written), each with where its tokens go,
        as JSON: the report ``openprogram context SESSION --json`` gives.

        Args:
            session: the session id (optional when the server serves one session)
        """
        reader = self.reader(session)
        with self._lock:
            found = prompts(reader.graph, reader.engine)
        return json.dumps(context_report(reader.graph, found, reader.engine.counter))

    def rollback(self, layer: str, session: str | None = None) -> str:
        """Roll back a layer (and the layers built on it): the originals show again.

        Args:
            layer: the layer id
            session: the session id (optional when the server serves one session)
        """
        reader = self.reader(session)
        with self._lock:
            try:
                done = reader.engine.rollback(layer, reason="rolled back over MCP")
            except (ContextError, GraphError) as error:
                raise ToolError(self._said(error, layer)) from error
        return json.dumps({"rolled_back": [info.id for info in done]})

    def compact(self, focus: str | None = None, session: str | None = None) -> str:
        """Compact the session now: one summary layer over all but the newest rounds.

        Args:
            focus: what the summary should keep in particular
            session: the session id (optional when the server serves one session)
        """
        reader = self.reader(session)
        with self._lock:
            try:
                info = reader.engine.compact(focus)
            except (ContextError, GraphError) as error:
                raise ToolError(self._said(error, "compact")) from error
        return json.dumps({"layer": info.id, "covers": len(info.covers)})

    # -- resources -------------------------------------------------------------------------
    def _resource_reader(self, session: str) -> _Reader:
        try:
            return self.reader(session)
        except ToolError as error:
            raise ResourceNotFoundError(str(error)) from None

    def prompt(self, session: str) -> str:
        """A session's next prompt as it would be sent (messages in OpenAI format), with
        where each message came from (``sources``: node, variant, layer, tier)."""
        reader = self._resource_reader(session)
        with self._lock:
            rendered = reader.engine.preview()
        sources = msgspec.to_builtins(rendered.sources)
        shown = {"tokens": rendered.tokens, "messages": rendered.messages, "sources": sources}
        return json.dumps(shown, default=str)

    def records(self, session: str) -> str:
        """A session's compaction records, oldest first, as JSON lines."""
        import msgspec

        reader = self._resource_reader(session)
        return "\n".join(msgspec.json.encode(r).decode() for r in reader.engine.records())


READ_TOOLS = (
    "list_sessions",
    "list_layers",
    "read_output",
    "read_history",
    "expand_layer",
    "expand_function",
    "search_history",
    "inspect_node",
    "context",
)
WRITE_TOOLS = ("rollback", "compact")


def _check_page(offset: int, limit: int) -> None:
    """The bounds the input schemas declare, for a caller that skips the schema."""
    if offset < 0:
        raise ToolError(f"offset must be 0 or more, not {offset}")
    if not 1 <= limit <= READ_LIMIT:
        raise ToolError(f"limit must be between 1 and {READ_LIMIT:,} characters, not {limit}")


def build_server(history: HistoryServer) -> MCPServer[Any]:
    """An ``MCPServer`` whose tools and resources are ``history``'s."""
    server: MCPServer[Any] = MCPServer(
        "openprogram",
        instructions=(
            "Read an agent's full history, including what context compaction put away: "
            "placeholders and summaries in a prompt name the tool and the id to pass."
        ),
    )
    names = READ_TOOLS + (WRITE_TOOLS if history.allow_write else ())
    for name in names:
        server.add_tool(getattr(history, name), name=name, structured_output=False)
    server.resource(
        "openprogram://sessions/{session}/prompt",
        name="prompt",
        description="the session's next prompt (a preview)",
        mime_type="application/json",
    )(history.prompt)
    server.resource(
        "openprogram://sessions/{session}/records",
        name="records",
        description="the session's compaction records (JSON lines)",
        mime_type="application/x-ndjson",
    )(history.records)
    return server
