"""``ConversationGraph``: append OpenAI messages, nest function calls, fork, read back."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import msgspec

from ._appends import MessageWriter
from ._branches import BranchWriter
from ._codec import normalize_time
from ._copy import branch_of, renamed_records, same_records
from ._cursor import MAIN, Cursor
from ._errors import CrossSessionError, GraphError, InvalidMessage, NodeNotFound
from ._functions import Frame, FunctionHandle, FunctionWriter
from ._ids import is_safe_id, new_id
from ._layers import LayerWriter
from ._loading import apply_loaded, paused
from ._nodes import Edge, Event, Fork, LayerInfo, Node
from ._open import open_store
from ._protocols import Loaded
from ._reader import GraphReader
from ._redact import Redactor
from ._state import GraphState
from ._store import MemoryStore, Store


class ConversationGraph(GraphReader):
    """A session's conversation as a graph of dialogue, function and tool nodes.

    >>> g = ConversationGraph.memory()
    >>> _ = g.append({"role": "user", "content": "Find the bug"})
    >>> with g.function("research", input={"q": "bug"}) as fn:
    ...     _ = g.append({"role": "assistant", "content": "looked"})
    ...     fn.output = "it is in parse()"
    >>> [m["role"] for m in g.to_openai()]
    ['user', 'assistant', 'assistant', 'tool']

    The graph holds its writers as objects sharing its state, cursor, lock and commit:
    messages (``_appends``), function nodes (``_functions``), layers (``_layers``) and
    named branches (``_branches``); their public methods here delegate to them.
    """

    def __init__(
        self,
        store: Store,
        session: str,
        *,
        redactor: Redactor | None = None,
        repair: bool = False,
    ) -> None:
        if not is_safe_id(session):
            raise InvalidMessage("session", f"{session!r} is not a safe id ([A-Za-z0-9_.-])")
        self.store = store
        self.redactor = redactor
        """When set, every record is redacted before it is stored: message payloads and
        meta, tool results, function inputs, outputs and errors, layers."""
        self._lock = threading.RLock()
        self._state = GraphState(session)  # the store creates the session with its first write
        self._cursor = Cursor(self._state)
        self._functions = FunctionWriter(self, self._cursor, self._lock, self._commit)
        self._messages = MessageWriter(
            self, self._cursor, self._lock, self._commit, self._functions, self.refresh
        )
        self._layers = LayerWriter(
            self, store, self._cursor, self._lock, self.refresh, self.batch, self._commit
        )
        self._branches = BranchWriter(self, store, self._cursor, self._lock, self.refresh)
        self.repairs: list[str] = []
        """What loading had to leave out of a damaged session (empty when it is sound)."""
        self._repair = repair
        self._load()

    # -- construction -------------------------------------------------------------------
    @classmethod
    def memory(
        cls, session: str | None = None, *, redactor: Redactor | None = None
    ) -> ConversationGraph:
        """A graph kept in this process only."""
        return cls(MemoryStore(), session or new_id(), redactor=redactor)

    @classmethod
    def open(
        cls,
        url_or_path: str | os.PathLike[str] | None = None,
        session: str | None = None,
        *,
        redactor: Redactor | None = None,
        repair: bool = False,
    ) -> ConversationGraph:
        """Open (or create) a session in a database: a SQLite path, a URL, or the default.

        ``session=None`` creates a new session with a generated id. A damaged row is a
        ``StoreError`` naming session, seq and table; ``repair=True`` loads everything
        readable instead and lists what it left out in ``repairs``.
        """
        store = open_store(url_or_path)
        return cls(store, session or new_id(), redactor=redactor, repair=repair)

    def _load(self) -> None:
        loaded = self._catch_up()
        if loaded.head is not None and loaded.head in self._state.nodes:
            self._cursor.place(loaded.head)

    def _catch_up(self, before: int | None = None) -> Loaded:
        """Apply the stored records after ``last_seq`` (only those below ``before``).

        The index always holds exactly the records with ``seq <= last_seq``: a commit that
        finds other writers' records between ours and ``last_seq`` loads them first. A
        scrub since the last look (the store's scrub mark moved; the same query tells)
        rewrote text this index holds: it is read afresh, in place.
        """
        state = self._state
        loaded = self.store.load(
            self.session,
            after=state.last_seq,
            skipped=self.repairs if self._repair else None,
        )
        if loaded.scrubbed != state.scrubbed and state.records:
            return self._reload(before)
        state.scrubbed = loaded.scrubbed
        self._apply(state, loaded, before)
        return loaded

    def _apply(self, state: GraphState, loaded: Loaded, before: int | None) -> None:
        apply_loaded(state, loaded.records, before, self.repairs)

    def _reload(self, before: int | None) -> Loaded:
        """Read the whole session again into the index the cursor and writers share (ids,
        heads and frames are what they were: a scrub changes text, never structure)."""
        fresh = GraphState(self.session)
        self.repairs.clear()
        loaded = self.store.load(self.session, skipped=self.repairs if self._repair else None)
        fresh.scrubbed = loaded.scrubbed
        self._apply(fresh, loaded, before)
        self._state.adopt(fresh)
        return loaded

    def refresh(self) -> None:
        """Read what other writers appended to this session since we last looked (all of
        it again after a scrub: ``state.reloads`` counts those)."""
        with self._lock:
            self._catch_up()

    def close(self) -> None:
        self.store.close()

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Make many appends one transaction (importers use this).

        All or nothing: when the block raises, the database rolls back and so does this
        graph's in-memory index, head and frames, so no append of the batch survives
        anywhere. Batches nest (an inner one that fails undoes only its own appends).

        The cyclic garbage collector is paused inside, as while a session loads: what
        appends add to the index cannot form cycles, but each full collection rescans the
        whole index, and a long batch triggers one every few thousand appends, so its cost
        grew with the square of the batch (0.9 s of 7 s at 300k nodes).
        """
        with self._lock, paused():
            mark = len(self._state.records)
            saved = self._cursor.save()
            try:
                with self.store.transaction():
                    yield
            except BaseException:
                self._state.truncate(mark)
                self._cursor.restore(saved)
                raise

    # -- position -----------------------------------------------------------------------
    @property
    def head(self) -> str | None:
        """The newest node on the current frame's chain (None when the graph is empty)."""
        return self._cursor.head

    @property
    def frame(self) -> str | None:
        """The running function whose chain appends go to (None at top level)."""
        return self._cursor.frame

    def default_head(self) -> str | None:
        return self._cursor.head

    # -- writing ------------------------------------------------------------------------
    def _commit(
        self, records: list[Node | Event], edges: list[Edge], head: str | None
    ) -> list[Any]:
        if self.redactor is not None:
            records = [self.redactor.value(record) for record in records]
        fresh = self._state.last_seq == 0  # a session this graph never saw written may be new
        if self._cursor.branch == MAIN:
            first = self.store.commit(self.session, records, edges, head, create=fresh)
        else:
            with self.store.transaction():
                first = self.store.commit(
                    self.session, records, edges, self._branches.store_head(head), create=fresh
                )
        if first > self._state.last_seq + 1:
            self._catch_up(before=first)
        replace = msgspec.structs.replace
        state = self._state
        if len(records) == 1:  # most appends: one record, whose edges all point at it
            record = replace(records[0], seq=first)
            if isinstance(record, Event):
                state.apply_event(record)
            else:
                state.add_node(record, edges)
            return [record]
        stored = [replace(r, seq=first + i) for i, r in enumerate(records)]
        by_dst: dict[str, list[Edge]] = {}
        for edge in edges:
            by_dst.setdefault(edge.dst, []).append(edge)
        for record in stored:
            if isinstance(record, Event):
                state.apply_event(record)
            else:
                state.add_node(record, by_dst.get(record.id, ()))
        return stored

    def append(
        self,
        message: Mapping[str, object],
        *,
        at: Any = None,
        meta: dict[str, Any] | None = None,
        frame: Frame | None = None,
    ) -> Node:
        """Append an OpenAI chat message; a ``tool`` message fills its pending tool node.

        Returns the new dialogue node, or the tool node that received the result. A rejected
        message raises a :class:`GraphError` naming the field and stores nothing. ``frame``
        names the chain to append to (the implicit current frame when None).
        """
        return self._messages.append(message, at=at, meta=meta, frame=frame)

    def clone(self, store: Store | None = None, session: str | None = None) -> ConversationGraph:
        """This session, every node, event and layer with the same ids and seqs, in another
        store (a new memory store by default): replays and experiments work on the copy.

        >>> g = ConversationGraph.memory()
        >>> _ = g.append({"role": "user", "content": "hi"})
        >>> copy = g.clone()
        >>> copy.to_openai() == g.to_openai() and copy.store is not g.store
        True
        """
        target = store if store is not None else MemoryStore()
        name = session or self.session
        with self._lock:
            if target.load(name).records:
                raise GraphError(f"session {name!r} already holds nodes in {target.url}")
            records, edges = same_records(self._state, name)
            if records:
                with target.transaction():
                    target.commit(name, records, edges, self.head)
        return ConversationGraph(target, name)

    def copy_to(self, store: Store, session: str, *, head: str | None = None) -> ConversationGraph:
        """A copy with new node and layer ids (so it can live beside this one in the same
        database) of the whole session, or only of the branch ending at ``head``: its chain,
        the insides of its functions, its tool calls and the layers over them."""
        if not is_safe_id(session):
            raise InvalidMessage("session", f"{session!r} is not a safe id ([A-Za-z0-9_.-])")
        with self._lock:
            self.refresh()  # what other writers (a fork's session object) appended too
            keep = None if head is None else branch_of(self._state, head)
            records, edges, ids = renamed_records(self._state, session, keep)
            if store.load(session).records:
                raise GraphError(f"session {session!r} already holds nodes in {store.url}")
            if records:
                with store.transaction():
                    store.commit(session, records, edges, ids.get(head or self.head or ""))
        return ConversationGraph(store, session)

    def restart(self) -> None:
        """Start a new root: the next top-level append has no predecessor, so it begins a
        branch that shares nothing with the nodes before it (which all stay). Used when a
        conversation held elsewhere starts over (an adapter's ``clear_session``)."""
        with self._lock:
            if self._cursor.frames:
                raise GraphError("cannot restart inside a function's frame; finish it first")
            self._cursor.clear()

    def fork(self, node_id: str | Node) -> str:
        """Move the head back to ``node_id``: the next append starts a branch there."""
        if isinstance(node_id, Node):
            if node_id.session != self.session:
                raise CrossSessionError(
                    f"node {node_id.id} is in session {node_id.session!r}, not {self.session!r}"
                )
            node_id = node_id.id
        with self._lock:
            if node_id not in self._state.nodes:
                self.refresh()
            if node_id not in self._state.nodes:
                other = self.store.session_of(node_id)
                if other is not None and other != self.session:
                    raise CrossSessionError(
                        f"node {node_id} belongs to session {other!r}, not {self.session!r}; "
                        "forking across sessions is not supported"
                    )
                raise NodeNotFound(node_id, self.session)
            if self._state.nodes[node_id].kind == "tool":
                raise GraphError(
                    f"node {node_id} is a tool node; fork from the assistant node that requested it"
                )
            event = Event(
                session=self.session, seq=0, node_id=node_id, at=normalize_time(None), data=Fork()
            )
            self._commit([event], [], node_id)
            self._cursor.place(node_id)
            return node_id

    # -- function nodes (``_functions``) --------------------------------------------------
    def head_of(self, frame: Frame | None = None) -> str | None:
        """The newest node on a frame's chain (the implicit frame's when None)."""
        return self._functions.head_of(frame)

    def start_function(
        self,
        name: str,
        input: Any = None,
        expose: str = "io",
        *,
        frame: Frame | None = None,
        spawned_by: str | None = None,
        at: Any = None,
        meta: dict[str, Any] | None = None,
    ) -> FunctionHandle:
        """Add a running function node to ``frame``'s chain (the implicit frame's when None,
        which then also enters it); finish it with :meth:`finish_function`.

        ``spawned_by`` names the tool node whose execution started it; by default, the
        single pending tool call of the frame's head assistant, if there is exactly one.
        """
        return self._functions.start_function(
            name, input, expose, frame=frame, spawned_by=spawned_by, at=at, meta=meta
        )

    def finish_function(
        self,
        function: FunctionHandle | str,
        *,
        output: Any = None,
        error: BaseException | str | None = None,
        status: str | None = None,
    ) -> Node:
        """Finish a running function: ``completed`` with ``output``, ``error`` with the
        error's message, or ``status="interrupted"`` (its owner died)."""
        return self._functions.finish_function(function, output=output, error=error, status=status)

    @contextmanager
    def function(
        self,
        name: str,
        input: Any = None,
        expose: str = "io",
        *,
        spawned_by: str | None = None,
        at: Any = None,
        meta: dict[str, Any] | None = None,
        frame: Frame | None = None,
    ) -> Iterator[FunctionHandle]:
        """Run a block as a function node; appends inside it form the function's own chain.

        On normal exit the node completes with ``handle.output``; on an exception its status
        is ``error`` with the message, and the exception propagates. With ``frame`` the
        node goes on that frame's chain and the block appends with ``frame=handle.frame``.
        """
        handle = self.start_function(
            name, input, expose, frame=frame, spawned_by=spawned_by, at=at, meta=meta
        )
        try:
            yield handle
        except BaseException as error:
            self.finish_function(handle, error=error)
            raise
        else:
            self.finish_function(handle, output=handle.output)

    # -- layers (``_layers``) -------------------------------------------------------------
    def add_layer(
        self,
        kind: str,
        covers: list[str] | tuple[str, ...],
        replacement: Any = None,
        *,
        builds_on: list[str] | tuple[str, ...] = (),
        meta: dict[str, Any] | None = None,
        at: Any = None,
        layer_id: str | None = None,
    ) -> LayerInfo:
        """Record a layer over ``covers`` (a sequenced fact; no node changes).

        Active layers wholly inside ``covers`` are built on (added to ``builds_on``); a
        layer inside an active one refines it (shown in its place there). One that overlaps
        an active layer only in part, where one branch's walk could hold both, is refused
        with :class:`LayerConflict`; layers of two forks never block each other. The check
        runs under the session's lock after reading what other processes stored.

        >>> g = ConversationGraph.memory()
        >>> ids = [g.append({"role": "user", "content": str(i)}).id for i in range(3)]
        >>> inner = g.add_layer("collapse", ids[:2], "0 and 1")
        >>> outer = g.add_layer("compact", ids, "all three")
        >>> outer.builds_on == (inner.id,)
        True
        >>> [i.id for i in g.rollback_layer(inner.id)] == [outer.id, inner.id]
        True
        """
        return self._layers.add_layer(
            kind, covers, replacement, builds_on=builds_on, meta=meta, at=at, layer_id=layer_id
        )

    def lock(self) -> None:
        """Inside a ``batch()``: hold the session's row and read what other writers stored
        first, so what is checked next is checked against every process's layers."""
        self._layers.lock()

    def rollback_layer(self, layer_id: str, reason: str | None = None) -> list[LayerInfo]:
        """Roll back a layer and every active layer built on it (those first); returns them
        as they are now. The covered nodes show through again wherever they are visible."""
        return self._layers.rollback_layer(layer_id, reason)

    # -- named branches (``_branches``) ---------------------------------------------------
    @property
    def branch(self) -> str:
        """The branch appends go to (``main`` until a ``checkout``)."""
        return self._cursor.branch

    def branches_by_name(self) -> dict[str, str | None]:
        """Every named branch and its head, ``main`` first (its head is None while the
        session is empty)."""
        return self._branches.branches_by_name()

    def create_branch(self, name: str, at: str) -> str:
        """A new branch whose head is node ``at`` (no node is written; appends after a
        ``checkout(name)`` grow it). Refuses a name in use and a tool node."""
        return self._branches.create_branch(name, at)

    def checkout(self, name: str) -> str | None:
        """Make ``name`` the branch appends go to and move to its head (returned)."""
        return self._branches.checkout(name)
