"""Named branches: a session's heads by name, owned by the session.

``main`` is the session's own head: it moves only by appends made on ``main`` and by an
explicit ``checkout`` (or ``fork``) there, never by work on another branch, in this process
or another. Every other branch's head is stored beside the session (a side value), so any
process sees it; an append on a branch moves that branch's head in the same transaction.

>>> from graph import ConversationGraph
>>> g = ConversationGraph.memory()
>>> first = g.append({"role": "user", "content": "plan"}).id
>>> _ = g.append({"role": "assistant", "content": "plan A"})
>>> g.create_branch("try-b", at=first)
'try-b'
>>> g.checkout("try-b") == first
True
>>> other = g.append({"role": "assistant", "content": "plan B"}).id
>>> g.branches_by_name()["try-b"] == other, g.checkout("main") != other
(True, True)
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ._cursor import MAIN, Cursor
from ._errors import GraphError, InvalidMessage, NodeNotFound
from ._ids import is_safe_id
from ._reader import GraphReader
from ._store import Store

BRANCHES = "graph.branches"
"""Side-value namespace of the other branches' heads, by name."""


class BranchWriter:
    """The named branches of one live graph: it reads through ``reader`` (the graph),
    keeps the other branches' heads in ``store`` and moves the shared ``cursor``;
    ``refresh`` reads what other writers stored."""

    def __init__(
        self,
        reader: GraphReader,
        store: Store,
        cursor: Cursor,
        lock: threading.RLock,
        refresh: Callable[[], None],
    ) -> None:
        self._state = reader.state
        self._store = store
        self._cursor = cursor
        self._lock = lock
        self._refresh = refresh

    def branches_by_name(self) -> dict[str, str | None]:
        session = self._state.session
        with self._lock:
            others = self._store.get_values(session, BRANCHES)
            main = self._cursor.head if self._cursor.branch == MAIN else self._stored_main()
            return {MAIN: main, **dict(sorted(others.items()))}

    def create_branch(self, name: str, at: str) -> str:
        if not isinstance(name, str) or not is_safe_id(name) or name == MAIN:
            raise InvalidMessage("name", f"{name!r} cannot name a branch ([A-Za-z0-9_.-])")
        session, store = self._state.session, self._store
        with self._lock:
            if at not in self._state.nodes:
                self._refresh()
            if at not in self._state.nodes:
                raise NodeNotFound(at, session)
            if self._state.nodes[at].kind == "tool":
                raise GraphError(f"node {at} is a tool node; branch at the node that requested it")
            with store.transaction():
                if name in store.get_values(session, BRANCHES, [name]):
                    raise GraphError(f"branch {name!r} exists in session {session!r}")
                store.put_values(session, BRANCHES, {name: at})
            return name

    def checkout(self, name: str) -> str | None:
        session, cursor = self._state.session, self._cursor
        with self._lock:
            self._refresh()
            if name == MAIN:
                head = self._stored_main() if cursor.branch != MAIN else cursor.head
            else:
                found = self._store.get_values(session, BRANCHES, [name])
                if name not in found:
                    known = ", ".join(self.branches_by_name())
                    raise GraphError(f"no branch {name!r} in session {session!r}: {known}")
                head = found[name]
            cursor.branch = name
            if head is None:
                cursor.clear()
            else:
                cursor.place(head)
            return head

    def _stored_main(self) -> str | None:
        """Main's head as the session stores it (moved only by appends on main)."""
        head = self._store.load(self._state.session, after=self._state.last_seq).head
        return head if head in self._state.nodes else None

    def store_head(self, head: str | None) -> str | None:
        """The head a commit stores for the session: ours on main, else main's stays (None)
        and the branch's head is stored beside it, in the commit's transaction."""
        branch = self._cursor.branch
        if branch == MAIN:
            return head
        if head is not None:
            self._store.put_values(self._state.session, BRANCHES, {branch: head})
        return None
