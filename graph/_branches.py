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
from typing import TYPE_CHECKING

from ._errors import GraphError, InvalidMessage, NodeNotFound
from ._ids import is_safe_id
from ._reader import GraphReader
from ._store import Store

MAIN = "main"
"""The branch a session starts on: its own head."""
BRANCHES = "graph.branches"
"""Side-value namespace of the other branches' heads, by name."""


class BranchWriter(GraphReader):
    """The named-branch half of :class:`~graph.ConversationGraph`."""

    store: Store
    _lock: threading.RLock
    _branch_name: str

    if TYPE_CHECKING:  # provided by ConversationGraph

        @property
        def head(self) -> str | None: ...

        def refresh(self) -> None: ...

        def _position(self, node_id: str) -> None: ...

        def _unposition(self) -> None: ...

    @property
    def branch(self) -> str:
        """The branch appends go to (``main`` until a ``checkout``)."""
        return self._branch_name

    def branches_by_name(self) -> dict[str, str | None]:
        """Every named branch and its head, ``main`` first (its head is None while the
        session is empty)."""
        with self._lock:
            others = self.store.get_values(self.session, BRANCHES)
            main = self.head if self._branch_name == MAIN else self._stored_main()
            return {MAIN: main, **dict(sorted(others.items()))}

    def create_branch(self, name: str, at: str) -> str:
        """A new branch whose head is node ``at`` (no node is written; appends after a
        ``checkout(name)`` grow it). Refuses a name in use and a tool node."""
        if not isinstance(name, str) or not is_safe_id(name) or name == MAIN:
            raise InvalidMessage("name", f"{name!r} cannot name a branch ([A-Za-z0-9_.-])")
        with self._lock:
            if at not in self._state.nodes:
                self.refresh()
            if at not in self._state.nodes:
                raise NodeNotFound(at, self.session)
            if self._state.nodes[at].kind == "tool":
                raise GraphError(f"node {at} is a tool node; branch at the node that requested it")
            with self.store.transaction():
                if name in self.store.get_values(self.session, BRANCHES, [name]):
                    raise GraphError(f"branch {name!r} exists in session {self.session!r}")
                self.store.put_values(self.session, BRANCHES, {name: at})
            return name

    def checkout(self, name: str) -> str | None:
        """Make ``name`` the branch appends go to and move to its head (returned)."""
        with self._lock:
            self.refresh()
            if name == MAIN:
                head = self._stored_main() if self._branch_name != MAIN else self.head
            else:
                found = self.store.get_values(self.session, BRANCHES, [name])
                if name not in found:
                    known = ", ".join(self.branches_by_name())
                    raise GraphError(f"no branch {name!r} in session {self.session!r}: {known}")
                head = found[name]
            self._branch_name = name
            if head is None:
                self._unposition()
            else:
                self._position(head)
            return head

    def _stored_main(self) -> str | None:
        """Main's head as the session stores it (moved only by appends on main)."""
        head = self.store.load(self.session, after=self._state.last_seq).head
        return head if head in self._state.nodes else None

    def _store_head(self, head: str | None) -> str | None:
        """The head a commit stores for the session: ours on main, else main's stays (None)
        and the branch's head is stored beside it, in the commit's transaction."""
        if self._branch_name == MAIN:
            return head
        if head is not None:
            self.store.put_values(self.session, BRANCHES, {self._branch_name: head})
        return None
