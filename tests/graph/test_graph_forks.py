"""Forks: moving the head back starts a branch; what may not be forked to."""

from __future__ import annotations

from pathlib import Path

import pytest
from _graph_helpers import call, check_tool_pairs

from graph import (
    ConversationGraph,
    CrossSessionError,
    FunctionFinished,
    GraphError,
    NodeNotFound,
    dispose_engines,
)


def _text(g: ConversationGraph) -> list[object]:
    return [m["content"] for m in g.to_openai()]


def test_fork_then_append_starts_a_branch() -> None:
    g = ConversationGraph.memory()
    u1 = g.append({"role": "user", "content": "q"})
    a1 = g.append({"role": "assistant", "content": "first answer"})
    u2 = g.append({"role": "user", "content": "more"})

    assert g.fork(u1.id) == u1.id
    assert g.head == u1.id
    assert [e.type for e in g.events()] == ["fork"]
    assert g.events()[0].node_id == u1.id
    assert _text(g) == ["q"]

    a2 = g.append({"role": "assistant", "content": "second answer"})
    assert g.predecessor(a2.id) == u1
    assert g.state.successors[u1.id] == (a1.id, a2.id)
    nexts = [e.dst for e in g.state.edges if e.type == "next" and e.src == u1.id]
    assert nexts == [a1.id, a2.id]
    assert g.branches() == [u2.id, a2.id]
    assert _text(g) == ["q", "second answer"]
    assert [m["content"] for m in g.to_openai(head=u2.id)] == ["q", "first answer", "more"]

    # forking by Node works too, and back onto the old branch
    g.fork(u2)
    g.append({"role": "assistant", "content": "on the old branch"})
    assert _text(g) == ["q", "first answer", "more", "on the old branch"]
    assert len(g.branches()) == 2


def test_fork_inside_a_running_function_stays_in_its_frame() -> None:
    g = ConversationGraph.memory()
    top = g.append({"role": "user", "content": "top"})
    with g.function("f") as fn:
        first = g.append({"role": "assistant", "content": "try 1"})
        g.append({"role": "user", "content": "no"})
        g.fork(first.id)
        assert g.frame == fn.id
        retry = g.append({"role": "assistant", "content": "try 2"})
        assert g.caller(retry.id) == g.get(fn.id)
        fn.output = "done"
    assert g.frame is None and g.head == fn.id
    assert g.predecessor(fn.id) == top
    assert g.get(fn.id).finish is not None
    assert g.get(fn.id).finish.last == retry.id
    assert [m["content"] for m in g.to_openai()][:3] == ["top", "try 1", "try 2"]


def test_fork_to_an_assistant_with_tools_keeps_pairs_valid() -> None:
    g = ConversationGraph.memory()
    g.append({"role": "user", "content": "q"})
    a = g.append({"role": "assistant", "content": None, "tool_calls": [call("t1"), call("t2")]})
    g.append({"role": "tool", "tool_call_id": "t1", "content": "one"})
    g.append({"role": "tool", "tool_call_id": "t2", "content": "two"})
    g.append({"role": "assistant", "content": "done"})
    g.fork(a.id)
    g.append({"role": "assistant", "content": "other summary"})
    messages = g.to_openai()
    check_tool_pairs(messages)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]


def test_fork_to_another_sessions_node_raises(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/two.db"
    try:
        a = ConversationGraph.open(url, session="a")
        b = ConversationGraph.open(url, session="b")
        other = b.append({"role": "user", "content": "in b"})
        a.append({"role": "user", "content": "in a"})
        before = (a.nodes(), a.events(), a.head)
        with pytest.raises(CrossSessionError, match="'b'"):
            a.fork(other.id)
        with pytest.raises(CrossSessionError, match="'b'"):
            a.fork(other)
        assert (a.nodes(), a.events(), a.head) == before
    finally:
        dispose_engines()


def test_fork_to_a_tool_node_raises() -> None:
    g = ConversationGraph.memory()
    a = g.append({"role": "assistant", "content": None, "tool_calls": [call("t1")]})
    tool = g.tools(a.id)[0]
    with pytest.raises(GraphError, match="tool node"):
        g.fork(tool.id)
    assert g.events() == [] and g.head == a.id


def test_fork_to_unknown_node_raises() -> None:
    g = ConversationGraph.memory()
    with pytest.raises(NodeNotFound) as error:
        g.fork("01NOSUCHNODE0000000000000")
    assert error.value.node_id == "01NOSUCHNODE0000000000000"
    assert isinstance(error.value, KeyError)


def test_fork_into_a_finished_function_then_append_raises() -> None:
    g = ConversationGraph.memory()
    g.append({"role": "user", "content": "go"})
    with g.function("done-already") as fn:
        inner = g.append({"role": "assistant", "content": "inside"})
        fn.output = "x"
    g.fork(inner.id)
    assert g.frame == fn.id and g.head == inner.id
    snapshot = (g.nodes(), g.events(), g.to_openai())
    with pytest.raises(FunctionFinished, match="done-already"):
        g.append({"role": "user", "content": "more"})
    with pytest.raises(FunctionFinished), g.function("nested"):
        pass
    assert (g.nodes(), g.events(), g.to_openai()) == snapshot

    # forking to the finished function node itself continues after it, at top level
    g.fork(fn.id)
    after = g.append({"role": "user", "content": "after"})
    assert g.predecessor(after.id) == g.get(fn.id)
    assert g.caller(after.id) is None


def test_restart_starts_a_new_root_and_keeps_every_node(tmp_path: Path) -> None:
    g = ConversationGraph.open(tmp_path / "g.db", "s1")
    old = g.append({"role": "user", "content": "old question"})
    g.append({"role": "assistant", "content": "old answer"})
    g.restart()
    assert g.head is None and g.to_openai() == []
    new = g.append({"role": "user", "content": "new question"})
    assert g.predecessor(new.id) is None
    assert _text(g) == ["new question"]
    assert old.id in g and len(g) == 3
    again = ConversationGraph.open(tmp_path / "g.db", "s1")
    assert again.head == new.id and _text(again) == ["new question"]
    dispose_engines()


def test_restart_inside_a_function_raises() -> None:
    g = ConversationGraph.memory()
    with g.function("work"), pytest.raises(GraphError, match="function's frame"):
        g.restart()
