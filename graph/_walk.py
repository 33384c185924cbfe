"""The membership walk: which nodes a render from a head (and frame) sees, in order.

From ``head`` the walk follows the conversation chain back to the root. Nodes of running
functions that enclose the head are seen in full (the function's own view of itself); every
other function node is seen through its ``expose`` mode:

- ``io``: one unit, the call and its output (a spawned function's io is its tool's result),
- ``full``: its own chain inlined, then the unit,
- ``llm``: only its dialogue turns and their tools,
- ``hidden``: nothing.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from ._errors import GraphError
from ._nodes import Dialogue, Function, Node
from ._state import GraphState

View = Literal["message", "tool", "call", "enter"]


class Step(NamedTuple):
    """One visible node: how it is seen, its depth in function nesting, and whether it lies
    inside a running function's subtree (such steps are never snipped)."""

    node: Node
    view: View
    depth: int
    running: bool


def visible(
    state: GraphState,
    head: str | None,
    frame: str | None = None,
    *,
    expose: str | None = None,
) -> list[Step]:
    """The ordered visible steps from ``head``; ``expose`` overrides every function's mode.

    ``frame`` names the running function whose LLM call is being rendered; ``head`` then
    defaults to the newest node of its chain and must lie inside it.
    """
    if frame is not None:
        frame_node = state.get(frame)
        if frame_node.kind != "function":
            raise GraphError(f"frame {frame!r} is a {frame_node.kind} node, not a function")
        if head is None:
            head = state.frame_head(frame)
        elif head != frame and frame not in state.ancestry(head):
            raise GraphError(f"head {head!r} is not inside frame {frame!r}")
    if head is not None and state.get(head).kind == "tool":
        raise GraphError(f"head {head!r} is a tool node; tools hang off their assistant")
    chain = state.chain(head)
    enclosing = set(state.ancestry(head)) if head is not None else set()
    return _steps(state, chain, enclosing, expose)


def visible_since(state: GraphState, head: str, since: str) -> list[Step] | None:
    """The steps :func:`visible` would add for the chain nodes after ``since`` up to ``head``.

    None when ``since`` is not on ``head``'s chain (a fork, another branch): then the caller
    must walk in full. Lets a renderer extend its last walk instead of redoing it.
    """
    if head == since:
        return []
    chain = state.chain(head, stop=since)
    if not chain or state.prev.get(chain[0]) != since:
        return None
    return _steps(state, chain, set(state.ancestry(head)), None)


def inside(state: GraphState, function_id: str, depth: int = 1) -> list[Step]:
    """A function's own chain, as a render from inside it showed it while it ran: nested
    functions through their expose modes (``depth=1``) or in full (``depth`` above 1).

    >>> from graph import ConversationGraph
    >>> g = ConversationGraph.memory()
    >>> with g.function("outer") as fn:
    ...     _ = g.append({"role": "user", "content": "look"})
    ...     with g.function("inner", expose="io") as inner:
    ...         _ = g.append({"role": "assistant", "content": "deep"})
    ...         inner.output = "found"
    >>> [s.view for s in inside(g.state, fn.id)], len(inside(g.state, fn.id, depth=2))
    (['message', 'call'], 3)
    """
    node = state.get(function_id)
    if node.kind != "function":
        raise GraphError(f"node {function_id} is a {node.kind} node, not a function")
    chain = state.chain(state.frame_head(function_id), stop=function_id)
    running = node.finish is None
    steps: list[Step] = []
    for node_id in chain:
        inner = state.nodes[node_id]
        _emit(state, inner, 1, running, "full" if depth > 1 else None, steps)
    return steps


def _steps(
    state: GraphState, chain: list[str], enclosing: set[str], expose: str | None
) -> list[Step]:
    steps: list[Step] = []
    for node_id in chain:
        node = state.nodes[node_id]
        ancestry = state.ancestry(node_id)
        running = any(state.nodes[f].finish is None for f in ancestry)
        if node_id in enclosing:
            steps.append(Step(node, "enter", len(ancestry), running))
        else:
            _emit(state, node, len(ancestry), running, expose, steps)
    return steps


def _emit(
    state: GraphState,
    node: Node,
    depth: int,
    running: bool,
    expose: str | None,
    steps: list[Step],
) -> None:
    if isinstance(node.payload, Dialogue):
        steps.append(Step(node, "message", depth, running))
        for tool_id in state.tools.get(node.id, ()):
            steps.append(Step(state.nodes[tool_id], "tool", depth, running))
        return
    if not isinstance(node.payload, Function):
        return
    mode = expose or node.payload.expose
    spawned = node.id in state.spawned_by
    if mode == "hidden":
        return
    if mode in ("full", "llm"):
        inner_running = running or node.finish is None
        for inner_id in state.chain(state.frame_head(node.id), stop=node.id):
            inner = state.nodes[inner_id]
            if mode == "llm" and not isinstance(inner.payload, Dialogue):
                continue
            _emit(state, inner, depth + 1, inner_running, expose, steps)
        if mode == "llm":
            return
    if not spawned:
        steps.append(Step(node, "call", depth, running))
