"""Edges only ever point from an existing node at the node being added: no cycle can form."""

from __future__ import annotations

from datetime import UTC, datetime

import networkx as nx
import pytest

from graph import ConversationGraph, CycleError, Dialogue, Edge, GraphState, Node, NodeNotFound


def _node(node_id: str, seq: int) -> Node:
    return Node(
        id=node_id,
        session="s",
        seq=seq,
        at=datetime(2026, 1, 1, tzinfo=UTC),
        payload=Dialogue(role="user", content=node_id),
    )


def test_an_edge_back_into_an_older_node_is_refused() -> None:
    state = GraphState("s")
    state.add_node(_node("a", 1))
    state.add_node(_node("b", 2), [Edge("a", "b", "next")])
    with pytest.raises(CycleError, match="must point at the new node"):
        state.add_node(_node("c", 3), [Edge("b", "a", "next")])
    assert state.order == ["a", "b"]


def test_a_self_loop_is_refused() -> None:
    state = GraphState("s")
    state.add_node(_node("a", 1))
    with pytest.raises(CycleError, match="self-loop"):
        state.add_node(_node("b", 2), [Edge("b", "b", "next")])


def test_an_edge_from_an_unknown_node_is_refused() -> None:
    state = GraphState("s")
    with pytest.raises(NodeNotFound):
        state.add_node(_node("b", 2), [Edge("ghost", "b", "next")])


def test_forks_and_nesting_stay_acyclic() -> None:
    g = ConversationGraph.memory()
    first = g.append({"role": "user", "content": "one"})
    with g.function("f"):
        g.append({"role": "assistant", "content": "inside"})
    g.fork(first.id)
    g.append({"role": "assistant", "content": "branch"})
    assert nx.is_directed_acyclic_graph(g.to_networkx())
