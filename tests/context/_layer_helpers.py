"""Sessions, fake summarizers and comparisons for the layer, recover, preset and restart
tests (imported as a top-level module, like ``_context_helpers``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from _context_helpers import start, tool_round

from context import Anchors, Rendered, SummaryRequest, SummaryResult
from graph import ConversationGraph

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
AUTO_COMPACT = ("offload", "budget_reduction", "microcompact", "compact", "snip", "emergency")
"""The claude-code cascade without collapse: auto-compact is the summarizing tier."""


def clock() -> datetime:
    return NOW


def encode(rendered: Rendered) -> str:
    """What a provider would receive, byte for byte, plus the token count."""
    return json.dumps([rendered.messages, rendered.tokens, rendered.context_management])


class Counting:
    """A well-behaved summarizer that counts its calls, by the node ids it was asked about.

    It leaves ``SummaryResult.summarizer`` empty, as a third-party summarizer may."""

    name = "counting"

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    @property
    def calls(self) -> list[tuple[str, ...]]:
        return [tuple(r.node_ids) for r in self.requests]

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.requests.append(request)
        n = len(self.requests)
        return SummaryResult(
            anchors=Anchors(
                user_intent=("fix the parser",),
                execution_progress=(f"read {len(request.units)} unit(s)",),
                key_decisions=(f"decision {n}",),
                next_steps=(f"next step {n}",),
            ),
            prose=f"summary number {n}",
        )


class Broken:
    """A summarizer that raises or returns something unusable; counts its calls."""

    def __init__(self, name: str, reply: Callable[[SummaryRequest], Any]) -> None:
        self.name = name
        self.reply = reply
        self.calls = 0

    def summarize(self, request: SummaryRequest) -> Any:
        self.calls += 1
        return self.reply(request)


def _raise(request: SummaryRequest) -> Any:
    raise RuntimeError("summarizer backend is down")


BROKEN: dict[str, Callable[[SummaryRequest], Any]] = {
    "raising": _raise,
    "not-a-result": lambda request: {"prose": "a dict, not a SummaryResult"},
    "none": lambda request: None,
    "empty": lambda request: SummaryResult(anchors=Anchors()),
}


def session(
    g: ConversationGraph,
    rounds: int,
    *,
    words: int = 30,
    first: int = 0,
    system: str = "You are terse.",
    task: str = "Fix the bug.",
) -> list[tuple[str, str]]:
    """A system prompt and task (unless ``first``), then ``rounds`` rounds of a user
    message, an assistant message calling Bash, and its output; returns the (user,
    assistant) node ids of each round."""
    if first == 0:
        start(g, system=system, task=task)
    ids = []
    for i in range(first, first + rounds):
        user = g.append({"role": "user", "content": f"step {i}: look at src/module_{i}.py"}, at=NOW)
        assistant = tool_round(
            g,
            [("Bash", f"output line of step {i}\n" * words)],
            prefix=f"c{i}",
            content=f"running the tests for module_{i} because the parser fails",
            at=NOW,
        )
        ids.append((user.id, assistant.id))
    return ids
