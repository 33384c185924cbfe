"""Reopening a session whose last append was inside running functions."""

from __future__ import annotations

from graph import TOP, ConversationGraph, Frame, MemoryStore


def test_reopened_inside_running_functions_keeps_every_chain() -> None:
    store = MemoryStore()
    g = ConversationGraph(store, "s")
    g.append({"role": "user", "content": "task"})
    outer = g.start_function("outer", frame=TOP)
    g.append({"role": "user", "content": "outer work"}, frame=outer.frame)
    inner = g.start_function("inner", frame=outer.frame)
    deep = g.append({"role": "user", "content": "inner work"}, frame=inner.frame)

    again = ConversationGraph(store, "s")  # as a new process would, both still running
    assert again.head == deep.id and again.frame == inner.id
    assert again.head_of(Frame(inner.id)) == deep.id
    assert again.head_of(Frame(outer.id)) == inner.id
    assert again.head_of(TOP) == outer.id
    top = again.append({"role": "user", "content": "meanwhile"}, frame=TOP)
    assert again.state.prev[top.id] == outer.id  # not a new root
    beside = again.append({"role": "user", "content": "more outer work"}, frame=outer.frame)
    assert again.state.prev[beside.id] == inner.id
    assert again.to_openai(head=top.id)[0]["content"] == "task"
