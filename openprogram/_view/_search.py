"""The viewer's search: every node's text, those under layers too, found by a substring.

A search of a 100,000-node session reads every node's text; the lower-cased texts are
kept per session while nothing is stored and nothing scrubbed, so the next search only
scans them.
"""

from __future__ import annotations

from graph import ConversationGraph, Node, resolve_ref
from openprogram._view._facts import node_text

__all__ = ["NodeSearch"]

Hit = tuple[Node, str]


class NodeSearch:
    """Finds nodes by text, a session's lower-cased texts kept between searches."""

    def __init__(self) -> None:
        self._texts: dict[str, tuple[tuple[int, int], list[str]]] = {}

    def forget(self, session: str) -> None:
        self._texts.pop(session, None)

    def find(
        self, session: str, graph: ConversationGraph, query: str, limit: int
    ) -> tuple[list[Hit], int]:
        """Nodes whose text contains ``query`` (case-insensitive), at most ``limit`` with a
        snippet each, and how many there are; a query that is a node's id or handle (as a
        prompt shows it) finds that node first."""
        needle = query.lower()
        hits: list[Hit] = []
        total = 0
        named = resolve_ref(graph.state, query.strip())
        if named is not None and named in graph:
            hits.append((graph.get(named), node_text(graph.get(named))[:160]))
            total += 1
        for node, low in zip(graph.nodes(), self._lowered(session, graph), strict=True):
            if node.id == named:
                continue
            at = low.find(needle)
            if at < 0:
                continue
            total += 1
            if len(hits) < limit:
                text, start = node_text(node), max(0, at - 80)
                hits.append((node, text[start : at + len(query) + 80]))
        return hits, total

    def prepare(self, session: str, graph: ConversationGraph) -> None:
        """Make the session's lower-cased texts now (the viewer does it in the background)."""
        self._lowered(session, graph)

    def _lowered(self, session: str, graph: ConversationGraph) -> list[str]:
        key = (graph.last_seq, graph.state.reloads)
        kept = self._texts.get(session)
        if kept is None or kept[0] != key:
            kept = self._texts[session] = (key, [node_text(n).lower() for n in graph.nodes()])
        return kept[1]
