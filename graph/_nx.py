"""A networkx view of a session, and JSON / GraphML export.

The view holds ids and small attributes only (kind, role or name, status, seq), never
payloads, so a 100k-node session stays small; look payloads up by id in the graph.
"""

from __future__ import annotations

import json
import re
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


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
"""Characters XML 1.0 cannot hold at all, not even escaped as ``&#1;``."""


def _xml_text(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    return _NOT_XML.sub(lambda found: f"\\u{ord(found.group()):04x}", value)


def export_graphml(state: GraphState, path: str | Path) -> None:
    """Write the networkx view as GraphML (for Gephi, yEd, Cytoscape).

    A name holding a character XML cannot hold (a control character, a lone surrogate) is
    written with it spelled ``\\u0001``, so the file always parses; the graph keeps the
    name as it was.
    """
    view = to_networkx(state)
    clean = nx.MultiDiGraph(**{key: _xml_text(value) for key, value in view.graph.items()})
    for node, attrs in view.nodes(data=True):
        clean.add_node(node, **{key: _xml_text(value) for key, value in attrs.items()})
    for src, dst, key, attrs in view.edges(keys=True, data=True):
        clean.add_edge(src, dst, key=key, **{name: _xml_text(v) for name, v in attrs.items()})
    nx.write_graphml(clean, str(path))
