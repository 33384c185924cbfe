"""Where a mirror puts the graph's head: at its own, unless a sync writes nothing and the
graph's head stands a few nodes on along the same chain."""

from __future__ import annotations

from graph import ConversationGraph

__all__ = ["BEHIND", "behind", "move"]

BEHIND = 4
"""How many nodes the graph's head may stand past the mirror's when a sync writes nothing."""


def behind(graph: ConversationGraph, at: str | None) -> bool:
    """Whether the graph's head is a few nodes on from ``at`` (the mirror's head), on its
    chain: a sync that writes nothing (a history resent without the answer the graph holds
    after it) then leaves the graph's head there instead of moving it back (one write a
    request, and another to move it on again when the same answer is synced); the next
    sync that writes moves it first."""
    head = graph.head
    for _ in range(BEHIND):
        if head is None or at is None or graph.frame is not None:
            return False
        node = graph.predecessor(head)
        head = node.id if node is not None else None
        if head == at:
            return True
    return False


def move(graph: ConversationGraph, head: str | None) -> None:
    """Move the graph's head to ``head`` (``None``: before any node, a new root)."""
    if head is None:
        if graph.head is not None:
            graph.restart()
    elif graph.head != head:
        graph.fork(head)
