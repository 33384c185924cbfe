"""The offline demo: a nested research session, stored in SQLite, rendered under a budget.

No model and no network: the steps are scripted, so the demo runs the same everywhere. It
renders twice: from inside the running ``research`` function (its own big tool output is
offloaded) and from the top once it has finished (callers see its input and output only).
"""

from __future__ import annotations

import json
from typing import Any

from context import ContextEngine, Policy, Rendered
from graph import ConversationGraph

_SOURCE = "\n".join(
    f"{n:5d}  def handler_{n}(request): return route(request, {n})" for n in range(400)
)


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"id": call_id, "type": "function", "function": function}


def run_demo(
    url: str | None = None, budget: int = 6_000
) -> tuple[ConversationGraph, Rendered, Rendered]:
    """Build the session step by step; return it, the inner render and the final render."""
    graph = ConversationGraph.open(url)
    engine = ContextEngine(graph, Policy(), budget=budget)
    graph.append({"role": "system", "content": "You are a careful research agent."})
    graph.append({"role": "user", "content": "Find why requests to /api/export time out."})
    for step in range(6):
        call = _call(f"log{step}", "Bash", command=f"tail -n 200 app{step}.log")
        graph.append(
            {"role": "assistant", "content": f"Checking log {step}.", "tool_calls": [call]}
        )
        log = f"[log {step}] GET /api/export 504 after 30s\n" * 120
        graph.append({"role": "tool", "tool_call_id": f"log{step}", "content": log})
    with graph.function("research", input={"question": "where is /export slow?"}) as research:
        graph.append({"role": "user", "content": "Read the router and report the slow path."})
        graph.append({"role": "assistant", "content": None, "tool_calls": [_call("r1", "Read")]})
        graph.append({"role": "tool", "tool_call_id": "r1", "content": _SOURCE})
        inner = engine.render(frame=research.id)
        with graph.function("summarize", input={"file": "app/router.py"}, expose="full") as notes:
            graph.append({"role": "assistant", "content": "route() scans every handler."})
            notes.output = "route() is O(n) over 400 handlers"
        graph.append({"role": "assistant", "content": "The export handler is the last of 400."})
        research.output = "export is slow: route() scans 400 handlers; index them by path"
    graph.append({"role": "assistant", "content": "I will index the handlers by path."})
    return graph, inner, engine.render()
