"""Function nodes: nesting, caller edges, status/output, expose modes, spawned functions."""

from __future__ import annotations

from typing import Any

import pytest
from _graph_helpers import call, check_tool_pairs

from graph import (
    ConversationGraph,
    Finish,
    Function,
    GraphError,
    InvalidMessage,
    Step,
    steps_to_messages,
)


def _seen(steps: list[Step]) -> list[tuple[str, str, int]]:
    """(label, view, depth) per step; the label is the role or the function/tool name."""
    out: list[tuple[str, str, int]] = []
    for step in steps:
        payload: Any = step.node.payload
        label = step.node.role or payload.name
        if step.node.kind == "dialogue":
            label = f"{label}:{payload.content}"
        out.append((label, step.view, step.depth))
    return out


def test_nested_functions_chain_and_caller_edges() -> None:
    g = ConversationGraph.memory()
    user = g.append({"role": "user", "content": "go"})
    with g.function("outer", input={"q": 1}) as outer:
        assert g.frame == outer.id and g.head == outer.id
        first = g.append({"role": "user", "content": "o1"})
        with g.function("inner", input="deep") as inner:
            assert g.frame == inner.id
            deep = g.append({"role": "assistant", "content": "i1"})
            inner.output = "inner-out"
        assert g.frame == outer.id and g.head == inner.id
        last = g.append({"role": "assistant", "content": "o2"})
        outer.output = {"answer": 42}
    assert g.frame is None and g.head == outer.id

    # appends inside a function chain from the function node
    assert g.predecessor(outer.id) == g.get(user.id)
    assert g.predecessor(first.id) == g.get(outer.id)
    assert g.predecessor(inner.id) == g.get(first.id)
    assert g.predecessor(deep.id) == g.get(inner.id)
    assert g.predecessor(last.id) == g.get(inner.id)

    assert g.caller(outer.id) is None
    assert g.caller(first.id) == g.get(outer.id)
    assert g.caller(inner.id) == g.get(outer.id)
    assert g.caller(deep.id) == g.get(inner.id)
    assert [n.id for n in g.children(outer.id)] == [first.id, inner.id, last.id]
    assert [n.id for n in g.children(inner.id)] == [deep.id]
    callers = [(e.src, e.dst) for e in g.state.edges if e.type == "caller"]
    assert callers == [
        (outer.id, first.id),
        (outer.id, inner.id),
        (inner.id, deep.id),
        (outer.id, last.id),
    ]

    node = g.get(outer.id)
    assert node.kind == "function" and node.status == "completed"
    assert node.payload == Function(name="outer", input={"q": 1})
    assert node.output == {"answer": 42}
    assert node.finish == Finish(status="completed", output={"answer": 42}, last=last.id)
    assert g.get(inner.id).output == "inner-out"
    assert g.get(inner.id).finish == Finish(status="completed", output="inner-out", last=deep.id)
    assert outer.node == node and outer.name == "outer"
    assert [e.type for e in g.events()] == ["finish", "finish"]
    assert [e.node_id for e in g.events()] == [inner.id, outer.id]


def test_children_of_unknown_node_raises() -> None:
    g = ConversationGraph.memory()
    with pytest.raises(GraphError, match="nope"):
        g.children("nope")


def test_function_with_tool_calls_inside() -> None:
    g = ConversationGraph.memory()
    with g.function("agent") as fn:
        a = g.append({"role": "assistant", "content": None, "tool_calls": [call("t1")]})
        g.append({"role": "tool", "tool_call_id": "t1", "content": "found"})
        fn.output = "ok"
    tool = g.tools(a.id)[0]
    assert g.caller(tool.id) == g.get(fn.id)  # tools of an inner assistant are inside too
    assert [n.kind for n in g.children(fn.id)] == ["dialogue", "tool"]
    check_tool_pairs(g.to_openai())


def test_exception_marks_error_and_propagates() -> None:
    g = ConversationGraph.memory()
    g.append({"role": "user", "content": "go"})
    with pytest.raises(KeyError, match="missing"), g.function("lookup", input="k") as fn:
        inner = g.append({"role": "assistant", "content": "trying"})
        fn.output = "never stored"
        raise KeyError("missing")
    node = g.get(fn.id)
    assert node.status == "error"
    assert node.output is None
    assert node.finish == Finish(status="error", error="KeyError: 'missing'", last=inner.id)
    assert g.frame is None and g.head == fn.id

    messages = g.to_openai()
    assert messages[-1]["content"] == "[function lookup failed: KeyError: 'missing']"
    check_tool_pairs(messages)
    # the graph goes on after the failure
    after = g.append({"role": "user", "content": "again"})
    assert g.predecessor(after.id) == node


def test_error_in_nested_function_finishes_both_when_not_caught() -> None:
    g = ConversationGraph.memory()
    with pytest.raises(RuntimeError), g.function("outer") as outer, g.function("inner") as inner:
        raise RuntimeError("deep failure")
    assert g.get(inner.id).finish == Finish(
        status="error", error="RuntimeError: deep failure", last=inner.id
    )
    assert g.get(outer.id).status == "error"
    assert g.frame is None and g.head == outer.id


def test_caught_error_inside_outer_function() -> None:
    g = ConversationGraph.memory()
    with g.function("outer") as outer:
        with pytest.raises(ValueError), g.function("inner") as inner:
            raise ValueError("bad")
        assert g.frame == outer.id and g.head == inner.id
        nxt = g.append({"role": "assistant", "content": "recovered"})
        outer.output = "fine"
    assert g.get(inner.id).status == "error"
    assert g.get(outer.id).status == "completed"
    assert g.predecessor(nxt.id) == g.get(inner.id)


def test_function_arguments_are_checked() -> None:
    g = ConversationGraph.memory()
    with pytest.raises(InvalidMessage) as error, g.function("f", expose="everything"):
        pass
    assert error.value.field == "expose"
    with pytest.raises(InvalidMessage) as error, g.function(""):
        pass
    assert error.value.field == "name"
    assert g.nodes() == [] and g.events() == []


def _expose_graph(mode: str) -> tuple[ConversationGraph, dict[str, str]]:
    g = ConversationGraph.memory()
    ids = {"user": g.append({"role": "user", "content": "u"}).id}
    with g.function("work", input="in", expose=mode) as fn:
        ids["fn"] = fn.id
        g.append({"role": "user", "content": "inner-u"})
        g.append({"role": "assistant", "content": None, "tool_calls": [call("t1", "grep")]})
        g.append({"role": "tool", "tool_call_id": "t1", "content": "res"})
        with g.function("sub") as sub:
            sub.output = "sub-out"
        fn.output = "out"
    ids["after"] = g.append({"role": "assistant", "content": "after"}).id
    return g, ids


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("io", [("user:u", "message", 0), ("work", "call", 0), ("assistant:after", "message", 0)]),
        (
            "full",
            [
                ("user:u", "message", 0),
                ("user:inner-u", "message", 1),
                ("assistant:None", "message", 1),
                ("grep", "tool", 1),
                ("sub", "call", 1),
                ("work", "call", 0),
                ("assistant:after", "message", 0),
            ],
        ),
        (
            "llm",
            [
                ("user:u", "message", 0),
                ("user:inner-u", "message", 1),
                ("assistant:None", "message", 1),
                ("grep", "tool", 1),
                ("assistant:after", "message", 0),
            ],
        ),
        ("hidden", [("user:u", "message", 0), ("assistant:after", "message", 0)]),
    ],
)
def test_expose_modes_seen_from_outside(mode: str, expected: list[Any]) -> None:
    g, _ = _expose_graph(mode)
    assert _seen(g.visible()) == expected


@pytest.mark.parametrize("mode", ["io", "full", "llm", "hidden"])
def test_to_openai_is_the_full_history_whatever_the_mode(mode: str) -> None:
    g, ids = _expose_graph(mode)
    messages = g.to_openai()
    check_tool_pairs(messages)
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "u"),
        ("user", "inner-u"),
        ("assistant", None),
        ("tool", "res"),
        ("assistant", None),
        ("tool", "sub-out"),
        ("assistant", None),
        ("tool", "out"),
        ("assistant", "after"),
    ]
    assert messages[6]["tool_calls"][0]["id"] == f"fn_{g.get(ids['fn']).seq}"  # its handle


def test_io_unit_renders_input_and_output() -> None:
    g, ids = _expose_graph("io")
    messages = g.to_openai(head=ids["after"])
    call_message = messages[6]
    assert call_message["tool_calls"][0]["function"] == {
        "name": "work",
        "arguments": '{"input": "in"}',
    }


@pytest.mark.parametrize("mode", ["io", "full", "llm", "hidden"])
def test_running_function_is_fully_visible_from_inside(mode: str) -> None:
    g = ConversationGraph.memory()
    g.append({"role": "system", "content": "s"})
    g.append({"role": "user", "content": "u"})
    with g.function("work", expose=mode) as fn:
        g.append({"role": "user", "content": "inner-u"})
        g.append({"role": "assistant", "content": "inner-a"})
        expected = [
            ("system:s", "message", 0),
            ("user:u", "message", 0),
            ("work", "enter", 0),
            ("user:inner-u", "message", 1),
            ("assistant:inner-a", "message", 1),
        ]
        assert _seen(g.visible(frame=fn.id)) == expected
        assert _seen(g.visible()) == expected  # the head is inside the frame
        steps = g.visible(frame=fn.id)
        assert [s.running for s in steps] == [False, False, False, True, True]
        # from the caller's chain (head = the function node) it is seen through its mode
        outside = _seen(g.visible(head=fn.id))[2:]
        inner = [("user:inner-u", "message", 1), ("assistant:inner-a", "message", 1)]
        assert (
            outside
            == {
                "io": [("work", "call", 0)],
                "full": [*inner, ("work", "call", 0)],
                "llm": inner,
                "hidden": [],
            }[mode]
        )
        if mode == "io":
            unit = g.state.nodes[fn.id]
            assert steps_to_messages(g.visible(head=fn.id))[-1]["content"] == (
                f"[function work (node {unit.id}) is still running]"
            )
        fn.output = "done"


def test_frame_of_nested_running_function_shows_all_enclosing_chains() -> None:
    g = ConversationGraph.memory()
    g.append({"role": "user", "content": "top"})
    with g.function("outer", expose="hidden") as outer:
        g.append({"role": "assistant", "content": "o1"})
        with g.function("inner", expose="hidden") as inner:
            g.append({"role": "assistant", "content": "i1"})
            assert _seen(g.visible(frame=inner.id)) == [
                ("user:top", "message", 0),
                ("outer", "enter", 0),
                ("assistant:o1", "message", 1),
                ("inner", "enter", 1),
                ("assistant:i1", "message", 2),
            ]
            # the outer frame's own view stops at its newest chain node: inner, seen through
            # its mode (hidden) because the view is from outside it
            assert _seen(g.visible(frame=outer.id)) == [
                ("user:top", "message", 0),
                ("outer", "enter", 0),
                ("assistant:o1", "message", 1),
            ]
            assert _seen(g.visible(frame=outer.id, expose="io"))[-1] == ("inner", "call", 1)
            check_tool_pairs(g.to_openai())


def test_visible_rejects_bad_frames_and_heads() -> None:
    g = ConversationGraph.memory()
    u = g.append({"role": "user", "content": "u"})
    a = g.append({"role": "assistant", "content": None, "tool_calls": [call("t")]})
    with g.function("f") as fn:
        pass
    with pytest.raises(GraphError, match="not a function"):
        g.visible(frame=u.id)
    with pytest.raises(GraphError, match="not inside frame"):
        g.visible(head=u.id, frame=fn.id)
    with pytest.raises(GraphError, match="tool node"):
        g.visible(head=g.tools(a.id)[0].id)


def test_spawned_function_records_spawned_edge() -> None:
    g = ConversationGraph.memory()
    g.append({"role": "user", "content": "research"})
    a = g.append({"role": "assistant", "content": None, "tool_calls": [call("t1", "research")]})
    tool = g.tools(a.id)[0]
    with g.function("research", input="topic") as fn:
        g.append({"role": "assistant", "content": "reading"})
        fn.output = "summary"
    assert [(e.src, e.dst) for e in g.state.edges if e.type == "spawned"] == [(tool.id, fn.id)]
    assert g.state.spawned_by == {fn.id: tool.id}
    g.append({"role": "tool", "tool_call_id": "t1", "content": "summary"})

    # seen as io, a spawned function is its tool's result: no separate unit
    assert _seen(g.visible()) == [
        ("user:research", "message", 0),
        ("assistant:None", "message", 0),
        ("research", "tool", 0),
    ]
    messages = g.to_openai()
    check_tool_pairs(messages)
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "research"),
        ("assistant", None),
        ("tool", "summary"),
        ("assistant", "reading"),
    ]


def test_no_spawn_edge_with_two_pending_calls_or_none() -> None:
    g = ConversationGraph.memory()
    g.append({"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]})
    with g.function("f"):
        pass
    g.append({"role": "tool", "tool_call_id": "a", "content": "x"})
    g.append({"role": "tool", "tool_call_id": "b", "content": "y"})
    g.append({"role": "assistant", "content": "plain"})
    with g.function("g"):
        pass
    assert not [e for e in g.state.edges if e.type == "spawned"]


def test_explicit_spawned_by() -> None:
    g = ConversationGraph.memory()
    a = g.append({"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]})
    second = g.tools(a.id)[1]
    with g.function("for-b", spawned_by=second.id) as fn:
        pass
    assert g.state.spawned_by == {fn.id: second.id}
    with pytest.raises(InvalidMessage) as error, g.function("bad", spawned_by=a.id):
        pass
    assert error.value.field == "spawned_by"
