"""A networkx view of a session, and JSON / GraphML export.

The view holds ids and small attributes only (kind, role or name, status, seq), never
payloads, so a 100k-node session stays small; look payloads up by id in the graph.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import networkx as nx

from ._nodes import Dialogue, Function, Tool
from ._state import GraphState


def to_networkx(state: GraphState) -> nx.MultiDiGraph:
    """A ``networkx.MultiDiGraph`` of node ids with ``kind`` and edge ``type`` attributes.

    A multigraph keyed by edge type, because two nodes can be joined by two edges: a
    function and the first node of its own chain are linked by ``next`` and ``caller``.

    >>> from graph import ConversationGraph
    >>> g = ConversationGraph.memory()
    >>> _ = g.append({"role": "user", "content": "hi"})
    >>> _ = g.append({"role": "assistant", "content": "hello"})
    >>> view = g.to_networkx()
    >>> sorted(view.nodes[n]["kind"] for n in view), [d["type"] for *_, d in view.edges(data=True)]
    (['dialogue', 'dialogue'], ['next'])
    >>> with g.function("f"):
    ...     _ = g.append({"role": "user", "content": "inside"})
    >>> sorted(k for *_, k in g.to_networkx().out_edges(g.head, keys=True))
    ['caller', 'next']
    """
    view = nx.MultiDiGraph(session=state.session)
    for node_id in state.order:
        node = state.nodes[node_id]
        attrs: dict[str, Any] = {"kind": node.kind, "seq": node.seq, "status": node.status}
        payload = node.payload
        if isinstance(payload, Dialogue):
            attrs["role"] = payload.role
        elif isinstance(payload, Function | Tool):
            attrs["name"] = payload.name
        view.add_node(node_id, **attrs)
    for edge in state.edges:
        view.add_edge(edge.src, edge.dst, key=edge.type, type=edge.type)
    return view


def export_json(state: GraphState, path: str | Path) -> None:
    """Write the networkx view as node-link JSON."""
    data = nx.node_link_data(to_networkx(state), edges="edges")
    Path(path).write_text(json.dumps(data, indent=1, default=str))


def export_graphml(state: GraphState, path: str | Path) -> None:
    """Write the networkx view as GraphML (for Gephi, yEd, Cytoscape)."""
    nx.write_graphml(to_networkx(state), str(path))
