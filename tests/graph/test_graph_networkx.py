"""The networkx view and its JSON / GraphML exports."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
from _graph_helpers import call

import graph
from graph import ConversationGraph


def _sample() -> tuple[ConversationGraph, dict[str, str]]:
    g = ConversationGraph.memory("nx-session")
    ids = {"user": g.append({"role": "user", "content": "go"}).id}
    a = g.append({"role": "assistant", "content": None, "tool_calls": [call("t1", "research")]})
    ids["asst"] = a.id
    ids["tool"] = g.tools(a.id)[0].id
    with g.function("research", input="q") as fn:
        ids["fn"] = fn.id
        ids["inner"] = g.append({"role": "assistant", "content": "reading"}).id
        fn.output = "summary"
    g.append({"role": "tool", "tool_call_id": "t1", "content": "summary"})
    ids["final"] = g.append({"role": "assistant", "content": "done"}).id
    return g, ids


def test_view_attributes() -> None:
    g, ids = _sample()
    view = g.to_networkx()
    assert isinstance(view, nx.DiGraph) and view.is_directed()
    assert view.graph["session"] == "nx-session"
    assert list(view.nodes) == [n.id for n in g.nodes()]
    assert view.nodes[ids["user"]] == {
        "kind": "dialogue",
        "seq": 1,
        "status": "done",
        "role": "user",
    }
    assert view.nodes[ids["tool"]] == {
        "kind": "tool",
        "seq": 3,
        "status": "done",
        "name": "research",
    }
    assert view.nodes[ids["fn"]] == {
        "kind": "function",
        "seq": 4,
        "status": "completed",
        "name": "research",
    }
    edges = sorted((u, v, d["type"]) for u, v, d in view.edges(data=True))
    assert edges == sorted(
        [
            (ids["user"], ids["asst"], "next"),
            (ids["asst"], ids["tool"], "requested"),
            (ids["asst"], ids["fn"], "next"),
            (ids["tool"], ids["fn"], "spawned"),
            (ids["fn"], ids["inner"], "next"),
            (ids["fn"], ids["inner"], "caller"),
            (ids["fn"], ids["final"], "next"),
        ]
    )
    assert {d["type"] for *_, d in view.edges(data=True)} <= {
        "next",
        "caller",
        "requested",
        "spawned",
    }
    assert nx.is_directed_acyclic_graph(view)


def test_every_stored_edge_is_in_the_view_with_its_type() -> None:
    g, _ = _sample()
    view = g.to_networkx()
    assert view.number_of_edges() == len(g.state.edges)
    for edge in g.state.edges:
        assert view.has_edge(edge.src, edge.dst, key=edge.type)
        assert view.edges[edge.src, edge.dst, edge.type]["type"] == edge.type


def test_view_supports_graph_algorithms() -> None:
    g, ids = _sample()
    view = g.to_networkx()
    chain = nx.subgraph_view(view, filter_edge=lambda u, v, k: k == "next")
    assert nx.shortest_path(chain, ids["user"], ids["final"]) == [
        ids["user"],
        ids["asst"],
        ids["fn"],
        ids["final"],
    ]
    assert nx.ancestors(view, ids["inner"]) == {ids["user"], ids["asst"], ids["tool"], ids["fn"]}
    order = list(nx.topological_sort(view))
    assert order.index(ids["user"]) < order.index(ids["fn"]) < order.index(ids["inner"])


def test_empty_graph_view() -> None:
    view = ConversationGraph.memory().to_networkx()
    assert view.number_of_nodes() == 0 and view.number_of_edges() == 0


def test_export_json_reads_back(tmp_path: Path) -> None:
    g, _ = _sample()
    out = tmp_path / "g.json"
    graph.export_json(g.state, out)
    data = json.loads(out.read_text())
    back = nx.node_link_graph(data, edges="edges")
    view = g.to_networkx()
    assert set(back.nodes) == set(view.nodes)
    assert dict(back.nodes(data=True)) == dict(view.nodes(data=True))
    assert sorted(back.edges(keys=True, data="type")) == sorted(view.edges(keys=True, data="type"))
    assert back.graph["session"] == g.session


def test_export_graphml_reads_back(tmp_path: Path) -> None:
    g, _ = _sample()
    out = tmp_path / "g.graphml"
    graph.export_graphml(g.state, out)
    back = nx.read_graphml(out)
    view = g.to_networkx()
    assert set(back.nodes) == set(view.nodes)
    assert dict(back.nodes(data=True)) == dict(view.nodes(data=True))
    assert sorted((u, v, d["type"]) for u, v, d in back.edges(data=True)) == sorted(
        (u, v, d["type"]) for u, v, d in view.edges(data=True)
    )
    assert nx.is_directed_acyclic_graph(back)
