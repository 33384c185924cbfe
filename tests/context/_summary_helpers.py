"""Sessions and units for the summarizer tests (imported as a top-level module)."""

from __future__ import annotations

import json
from typing import Any

from context import (
    ContextEngine,
    HeuristicSummarizer,
    Item,
    SummaryRequest,
    SummaryResult,
    TokenCounter,
    Unit,
)
from graph import ConversationGraph, Node

TASK = (
    "Fix the failing test in tests/test_parse.py: parse_header crashes on an empty line.\n"
    "Keep the public API of src/app/parse.py unchanged."
)
SYSTEM = "You are a careful coding agent. Use the tools to read and edit files."
TOOLS: tuple[dict[str, Any], ...] = (
    {
        "type": "function",
        "function": {
            "name": "Read",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"file_path": {"type": "string"}},
                "required": ["file_path"],
            },
        },
    },
)

_COUNTER = TokenCounter()


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def units_from(entries: list[tuple[dict[str, Any], Node | None]], kind: Any = "round") -> Unit:
    """One unit of ``kind`` from messages and the nodes they render (None: no node)."""
    items = tuple(
        Item(
            message,
            _COUNTER.count_message(message),
            node.id if node is not None else None,
            node.payload.name if node is not None and node.kind == "tool" else None,  # type: ignore[union-attr]
        )
        for message, node in entries
    )
    ids = tuple(dict.fromkeys(node.id for _, node in entries if node is not None))
    return Unit(items, kind, 0, node_ids=ids)


class _Recording:
    """A heuristic summarizer that keeps the requests it is given."""

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []
        self.inner = HeuristicSummarizer()

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.requests.append(request)
        return self.inner.summarize(request)


def units_after_task(g: ConversationGraph) -> tuple[Unit, ...]:
    """The units after the task as the engine groups them: those a collapse of them all
    asks a summarizer about (on a copy: ``g`` gets no layer)."""
    recording = _Recording()
    engine = ContextEngine(g.clone(), summarizer=recording, budget=1_000_000)
    after_task = [n.id for n in g.nodes()][2]  # session(): the system prompt, the task, …
    engine.collapse(after_task, g.head or after_task)
    (request,) = recording.requests
    return request.units


def session() -> ConversationGraph:
    """A small, realistic session: read, a failing test run, a refused edit, a function
    that completed and one that failed, and a plan."""
    g = ConversationGraph.memory("summary-session")
    g.append({"role": "system", "content": SYSTEM})
    g.append({"role": "user", "content": TASK})
    g.append(
        {
            "role": "assistant",
            "content": "I will read src/app/parse.py first.",
            "tool_calls": [call("c1", "Read", file_path="src/app/parse.py")],
        }
    )
    g.append(
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "def parse_header(raw):\n    key, value = raw.split(':')\n    return key, value\n",
        }
    )
    g.append(
        {
            "role": "assistant",
            "content": "Running the tests to see the failure.",
            "tool_calls": [call("c2", "Bash", command="pytest -q tests/test_parse.py")],
        }
    )
    g.append(
        {
            "role": "tool",
            "tool_call_id": "c2",
            "content": "FAILED tests/test_parse.py::test_empty - ValueError: not enough values\n"
            "1 failed, 3 passed in 0.12s",
        }
    )
    g.append(
        {
            "role": "assistant",
            "content": "The bug is in parse_header: split(':') fails on an empty line. "
            "I decided to return None for an empty line instead of raising.",
            "tool_calls": [call("c3", "Edit", file_path="src/app/parse.py", old_string="x")],
        }
    )
    g.append(
        {
            "role": "tool",
            "tool_call_id": "c3",
            "content": "permission denied: src/app/parse.py is read-only",
            "is_error": True,
        }
    )
    g.append({"role": "user", "content": "Try the apply_patch function instead."})
    with g.function("apply_patch", input={"path": "src/app/parse.py"}) as fn:
        fn.output = "patched src/app/parse.py (1 hunk)"
    try:
        with g.function("run_linter", input="ruff check src"):
            raise RuntimeError("ruff found E501 in src/app/parse.py")
    except RuntimeError:
        pass
    g.append(
        {
            "role": "assistant",
            "content": "Patched. Next I will rerun pytest -q tests/test_parse.py, then fix the "
            "E501 warning in src/app/parse.py.",
        }
    )
    return g


def request_of(g: ConversationGraph, **fields: Any) -> SummaryRequest:
    """A compaction request covering every unit after the task."""
    units = units_after_task(g)
    defaults: dict[str, Any] = {
        "kind": "compact",
        "units": units,
        "nodes": {n.id: n for n in g.nodes()},
        "task": TASK,
    }
    return SummaryRequest(**{**defaults, **fields})
