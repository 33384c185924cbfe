"""A summarizer that takes as long as a test says (and a growing Claude-Code-like
conversation to send through the proxy), for the mode in which no request waits for one.

``GatedSummarizer()`` writes nothing until the test sets ``gate``; ``GatedSummarizer(10.0)``
takes ten seconds a call (the benchmark). ``settle()`` waits until every call begun has
ended, so a test knows, without a clock, that a summary is ready before its next request.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from context import Anchors, SummaryRequest, SummaryResult

READ_TOOL = {
    "name": "Read",
    "description": "Read a file",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}


class GatedSummarizer:
    """Summaries written on the prefetcher's worker (``proactive``), each after ``gate``
    is set, or after ``seconds``."""

    name = "gated"
    proactive = True

    def __init__(self, seconds: float | None = None) -> None:
        self.seconds = seconds
        self.gate = threading.Event()
        self.started = 0
        self.finished = 0
        self._done = threading.Condition()

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        with self._done:
            self.started += 1
        if self.seconds is None:
            self.gate.wait(120)
        else:
            time.sleep(self.seconds)
        ids = request.node_ids
        result = SummaryResult(
            anchors=Anchors(execution_progress=(f"read the modules of nodes {ids[0]}…{ids[-1]}",)),
            prose="The agent read module after module looking for the failing handler.",
            summarizer=self.name,
        )
        with self._done:
            self.finished += 1
            self._done.notify_all()
        return result

    def settle(self, timeout: float = 60.0) -> bool:
        """Wait until every call begun has ended (False: ``timeout`` passed first)."""
        with self._done:
            return self._done.wait_for(lambda: self.finished >= self.started, timeout)


class Conversation:
    """A growing coding-agent history: a file read per turn, its output a few hundred tokens."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test"}]
        self.turn = 0

    def request(self, *, model: str = "claude-sonnet-4-5") -> bytes:
        n = self.turn = self.turn + 1
        self.messages.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Reading module {n}."},
            {"type": "tool_use", "id": f"toolu_{n:05d}", "name": "Read", "input": {"path": f"src/mod_{n}.py"}}]})  # fmt: skip
        result = f"def handler_{n}(event):\n" + f"    value_{n} = event.get('key_{n}')\n" * 12
        self.messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{n:05d}", "content": result}]})  # fmt: skip
        body = {"model": model, "max_tokens": 256, "system": "You are a coding agent.",
                "tools": [READ_TOOL], "messages": self.messages}  # fmt: skip
        return json.dumps(body).encode()


HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01", "content-type": "application/json"}
