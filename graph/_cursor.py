"""Where a live graph appends next: the newest node of each frame's chain, the stack of
running functions the implicit frame is in, and the branch appends go to.

One ``Cursor`` per :class:`~graph.ConversationGraph`, shared by the graph and its writers
(functions, layers, branches), so a head moved by one is the head every other one sees.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._nodes import Edge, Event, Node
from ._state import GraphState

MAIN = "main"
"""The branch a session starts on: its own head."""

Commit = Callable[[list[Node | Event], list[Edge], str | None], list[Any]]
"""The graph's one write path: store records and edges, moving the session's head to the
given node; returns the records as stored (with their seqs)."""

Saved = tuple[dict[str | None, str | None], list[str]]


class Cursor:
    """The heads by frame (``None``: the top level), the implicit frame stack, the branch."""

    def __init__(self, state: GraphState) -> None:
        self.state = state
        self.heads: dict[str | None, str | None] = {None: None}
        self.frames: list[str] = []
        self.branch = MAIN

    @property
    def frame(self) -> str | None:
        """The running function the implicit frame is in (None at top level)."""
        return self.frames[-1] if self.frames else None

    @property
    def head(self) -> str | None:
        """The newest node on the implicit frame's chain."""
        return self.heads.get(self.frame)

    def save(self) -> Saved:
        return dict(self.heads), list(self.frames)

    def restore(self, saved: Saved) -> None:
        self.heads, self.frames = saved

    def clear(self) -> None:
        """No head: the next append starts a new root."""
        self.heads, self.frames = {None: None}, []

    def place(self, node_id: str) -> None:
        """Make ``node_id`` the head, in the frame that holds it."""
        node = self.state.nodes[node_id]
        ancestry = self.state.ancestry(node_id)
        if node.kind == "function" and node.finish is None and node_id in self.frames:
            ancestry = [node_id, *ancestry]
        self.frames = list(reversed(ancestry))
        # Each enclosing function is the newest node of its caller's chain (it runs still):
        # a top-level append after reopening goes after it, not to a new root.
        self.heads = {None: None}
        caller: str | None = None
        for frame in self.frames:
            self.heads[caller] = frame
            caller = frame
        self.heads[self.frame] = node_id
