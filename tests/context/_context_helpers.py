"""Shared helpers for the context tests (imported as a top-level module under ``prepend``)."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from context import COLLAPSE_FIRST_CASCADE, Policy, state_folder
from graph import ConversationGraph, Node

_ULID = re.compile(r"(?<![0-9A-Z])[0-9A-HJKMNP-TV-Z]{26}(?![0-9A-Z])")
_RUN = re.compile(r"(.{1,6}?)\1{3,}", re.DOTALL)


WITH_COLLAPSE = COLLAPSE_FIRST_CASCADE
"""The claude-code cascade with collapse before auto-compact (the tier tests exercise it)."""

SEED = {
    "cascade": WITH_COLLAPSE,
    "always": ("offload", "budget_reduction"),
    "offload_chars": 10_000,
    "offload_share": None,
    "microcompact_first": 50,
    "microcompact_every": 25,
    "offload_chars_per_token": None,
    "schedule_floor_exponent": None,
}
"""The seed's every-turn offload (10k, whatever the budget) and budget reduction, collapse,
and Claude Code's microcompact count trigger (first at 50 tool calls, then every 25), which
the tier tests pin; the fixed cache-schedule floor they were written against."""


def policy(tmp_path: Path, **overrides: Any) -> Policy:
    """A policy with the seed's every-turn tiers."""
    return Policy(**{**SEED, **overrides})


def state_of(graph: ConversationGraph) -> Path:
    """The state folder of the graph's database (a memory store's temporary one)."""
    return state_folder(graph.store).path


class Stable:
    """Makes rendered messages snapshot-able: node ids become ``N1``, ``N2``… (in order of
    first appearance), the temporary folder ``<tmp>``, and a unit of 1–6 characters
    repeated over 16+ characters ``<unit×n>``."""

    def __init__(self, tmp_path: Path | None = None) -> None:
        self.names: dict[str, str] = {}
        self.tmp = str(tmp_path) if tmp_path is not None else None

    def text(self, value: str) -> str:
        if self.tmp:
            value = value.replace(self.tmp, "<tmp>")
        value = _RUN.sub(self._run, value)
        return _ULID.sub(self._name, value)

    def _name(self, match: re.Match[str]) -> str:
        return self.names.setdefault(match.group(0), f"N{len(self.names) + 1}")

    @staticmethod
    def _run(match: re.Match[str]) -> str:
        unit, whole = match.group(1), match.group(0)
        if len(whole) < 16:
            return whole
        return f"<{unit}×{len(whole) // len(unit)}>"

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k): self(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self(v) for v in value]
        return value


def call(call_id: str, name: str = "Bash", arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool_round(
    g: ConversationGraph,
    outputs: list[tuple[str, str]],
    *,
    prefix: str,
    content: str | None = None,
    at: datetime | None = None,
) -> Node:
    """One assistant message calling a tool per ``(name, output)``, then every result."""
    calls = [call(f"{prefix}_{i}", name) for i, (name, _) in enumerate(outputs)]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    node = g.append(message, at=at)
    for i, (_, output) in enumerate(outputs):
        g.append({"role": "tool", "tool_call_id": f"{prefix}_{i}", "content": output}, at=at)
    return node


def start(g: ConversationGraph, system: str = "You are terse.", task: str = "Fix the bug.") -> None:
    g.append({"role": "system", "content": system})
    g.append({"role": "user", "content": task})
