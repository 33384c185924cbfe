"""Property tests: random appends, tool results, nested functions and forks keep the graph
sound, readable as of any earlier seq, identical after reopening, and append-only."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import msgspec
import networkx as nx
from _graph_helpers import call, check_tool_pairs, graph_state, payload_bytes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import graph
from graph import ConversationGraph, steps_to_messages

OPERATION = st.one_of(
    st.tuples(st.just("user")),
    st.tuples(st.just("assistant"), st.integers(0, 3)),
    st.tuples(st.just("result"), st.integers(0, 10)),
    st.tuples(st.just("result"), st.integers(0, 10)),
    st.tuples(st.just("enter"), st.sampled_from(["io", "full", "llm", "hidden"]), st.booleans()),
    st.tuples(st.just("exit")),
    st.tuples(st.just("fork"), st.integers(0, 1000)),
)


class Driver:
    """Runs operations on a graph, tracking open functions and what was seen at each seq."""

    def __init__(self, g: ConversationGraph) -> None:
        self.g = g
        self.open: list[tuple[Any, bool]] = []  # (context manager, raise on exit)
        self.calls = 0
        self.history: list[tuple[int, bytes, list[dict[str, Any]]]] = []
        self.payloads: dict[str, bytes] = {}

    def run(self, op: tuple[Any, ...]) -> None:
        g = self.g
        kind = op[0]
        if kind == "user":
            g.append({"role": "user", "content": f"u{g.last_seq}"})
        elif kind == "assistant":
            calls = []
            for _ in range(op[1]):
                self.calls += 1
                calls.append(call(f"c{self.calls}", "tool", {"n": self.calls}))
            message: dict[str, Any] = {"role": "assistant", "content": f"a{g.last_seq}"}
            if calls:
                message["tool_calls"] = calls
            g.append(message)
        elif kind == "result":
            pending = sorted(g.state.pending)
            if pending:
                call_id = pending[op[1] % len(pending)]
                g.append({"role": "tool", "tool_call_id": call_id, "content": f"r-{call_id}"})
        elif kind == "enter":
            manager = g.function(f"f{g.last_seq}", input={"seq": g.last_seq}, expose=op[1])
            handle = manager.__enter__()
            handle.output = {"from": handle.id}
            self.open.append((manager, op[2]))
        elif kind == "exit":
            if self.open:
                self.exit_one()
        elif kind == "fork":
            targets = [
                n.id
                for n in g.nodes()
                if n.kind != "tool"
                and all(g.state.nodes[f].finish is None for f in g.state.ancestry(n.id))
            ]
            if targets:
                target = targets[op[1] % len(targets)]
                assert g.fork(target) == target
                assert g.head == target
        self.check_step()

    def exit_one(self) -> None:
        manager, fail = self.open.pop()
        if fail:
            error = ValueError("planned failure")
            assert manager.__exit__(ValueError, error, None) is False  # it propagates
        else:
            manager.__exit__(None, None, None)

    def close(self) -> None:
        while self.open:
            self.exit_one()
            self.check_step()

    def check_step(self) -> None:
        g = self.g
        check_tool_pairs(g.to_openai())
        check_tool_pairs(steps_to_messages(g.visible()))
        if g.frame is not None:
            check_tool_pairs(steps_to_messages(g.visible(frame=g.frame)))
        view = g.at(g.last_seq)
        self.history.append((g.last_seq, msgspec.json.encode(view.nodes()), view.to_openai()))
        current = payload_bytes(g)
        for node_id, encoded in self.payloads.items():
            assert current[node_id] == encoded, f"stored payload of {node_id} changed"
        self.payloads = current


def check_final(g: ConversationGraph, driver: Driver) -> None:
    view = g.to_networkx()
    assert nx.is_directed_acyclic_graph(view)
    assert view.number_of_nodes() == len(g)
    assert view.number_of_edges() == len(g.state.edges)

    seqs = sorted([n.seq for n in g.nodes()] + [e.seq for e in g.events()])
    assert seqs == list(range(1, g.last_seq + 1))
    record_seqs = [r.seq if isinstance(r, graph.Event) else r[0].seq for r in g.state.records]
    assert record_seqs == sorted(record_seqs) and len(set(record_seqs)) == len(record_seqs)
    assert [n.seq for n in g.nodes()] == sorted(n.seq for n in g.nodes())

    # edges always point from an older node at a newer one
    for edge in g.state.edges:
        assert g.get(edge.src).seq < g.get(edge.dst).seq

    # reading as of any earlier seq gives the graph as it was then
    for seq, nodes, messages in driver.history:
        then = g.at(seq)
        assert msgspec.json.encode(then.nodes()) == nodes
        assert then.to_openai() == messages

    # no pending call is lost: every tool node without a result is in the pending index
    pending = {n.payload.call_id for n in g.nodes() if n.kind == "tool" and n.result is None}  # type: ignore[union-attr]
    assert set(g.state.pending) == pending


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(ops=st.lists(OPERATION, max_size=40), on_disk=st.integers(0, 3))
def test_random_operations_keep_the_graph_sound(ops: list[tuple[Any, ...]], on_disk: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'prop.db'}"
        g = ConversationGraph.open(url, session="p") if on_disk == 0 else ConversationGraph.memory()
        try:
            driver = Driver(g)
            for op in ops:
                driver.run(op)
            driver.close()
            check_final(g, driver)

            reopened = (
                ConversationGraph.open(url, session="p")
                if on_disk == 0
                else ConversationGraph(g.store, g.session)
            )
            assert graph_state(reopened) == graph_state(g)
            assert reopened.branches() == g.branches()
            assert msgspec.json.encode(reopened.state.records) == msgspec.json.encode(
                g.state.records
            )
        finally:
            graph.dispose_engines()
