"""Token and cost totals of a session's LLM calls, read off the assistant nodes' usage."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graph import ConversationGraph
from openprogram._json import count


class _Totals:
    """Calls, tokens and cost summed over some of a session's LLM calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.input = 0
        self.cached = 0
        self.output = 0
        self.cost: float | None = 0.0

    def add(self, usage: Mapping[str, object]) -> None:
        """One call's usage as a node's meta holds it (counts, and a cost when priced)."""
        self.calls += 1
        read = count(usage.get("cache_read"))
        self.input += count(usage.get("input")) + read + count(usage.get("cache_creation"))
        self.cached += read
        self.output += count(usage.get("output"))
        cost = usage.get("cost")
        if cost is None or self.cost is None:
            self.cost = None
        elif isinstance(cost, int | float | str):
            self.cost += float(cost)
        else:
            raise TypeError(f"not a cost: {cost!r}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "input_tokens": self.input,
            "cached_tokens": self.cached,
            "output_tokens": self.output,
            "cost": None if self.cost is None else round(self.cost, 6),
        }


def usage_of(graph: ConversationGraph) -> dict[str, Any]:
    """Tokens in and out, cached tokens and cost, in total, per model and per function
    (the innermost agentic function that made the call; ``(top)`` outside any)."""
    total = _Totals()
    models: dict[str, _Totals] = {}
    functions: dict[str, _Totals] = {}
    state = graph.state
    for node in graph.nodes():
        usage = node.meta.get("usage") if node.role == "assistant" else None
        if not isinstance(usage, dict):
            continue
        caller = state.caller.get(node.id)
        function = str(state.nodes[caller].payload.name) if caller else "(top)"
        model = str(node.meta.get("model") or "?")
        for bucket in (total, models.setdefault(model, _Totals())):
            bucket.add(usage)
        functions.setdefault(function, _Totals()).add(usage)
    return {
        "total": total.as_dict(),
        "models": {k: v.as_dict() for k, v in models.items()},
        "functions": {k: v.as_dict() for k, v in functions.items()},
    }
