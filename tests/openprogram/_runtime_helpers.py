"""Shared helpers for the runtime tests (imported as a top-level module under ``prepend``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from context import COLLAPSE_FIRST_CASCADE, Policy
from graph import ConversationGraph, InvalidMessage, text_of
from openprogram import Session
from openprogram.testing import FunctionModel, ModelRequest, tool_call

PLACEHOLDER = re.compile(
    r"\b(read_output|read_history|expand_layer|expand_function|inspect_node|search_history)"
    r"\(([^)]*)\)"
)
"""A history tool named in a placeholder, and its arguments as written."""
QUOTED = re.compile(r'"([^"]*)"')
ULID = re.compile(r"(?<![0-9A-Za-z])[0-9A-Z]{26}(?![0-9A-Za-z])")


def small_policy(tmp_path: Path, **overrides: Any) -> Policy:
    """The claude-code cascade with collapse before auto-compact, segments of 2–3 rounds and
    Claude Code's microcompact count trigger, so tiers act on short sessions."""
    values: dict[str, Any] = {
        "cascade": COLLAPSE_FIRST_CASCADE,
        "microcompact_first": 50,
        "microcompact_every": 25,
        "collapse_min_rounds": 2,
        "collapse_max_rounds": 3,
        "collapse_keep_recent": 3,
    }
    values.update(overrides)
    return Policy.claude_code(None, **values)


def texts(messages: list[dict[str, Any]]) -> list[str]:
    """Each message's text (tool calls as ``name(arguments)``), for readable asserts."""
    found = []
    for message in messages:
        text = text_of(message.get("content"))
        calls = [
            f"{c['function']['name']}({c['function']['arguments']})"
            for c in message.get("tool_calls") or ()
        ]
        found.append(" ".join([text, *calls]).strip())
    return found


def contents(messages: list[dict[str, Any]]) -> list[Any]:
    return [m.get("content") for m in messages]


def placeholders(messages: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """Every ``tool("id", …)`` a placeholder in ``messages`` names: (tool, quoted args)."""
    found = []
    for message in messages:
        for match in PLACEHOLDER.finditer(text_of(message.get("content"))):
            found.append((match.group(1), QUOTED.findall(match.group(2))))
    return found


def without_ids(value: Any) -> Any:
    """``value`` (JSON-able) with node and layer ids renamed ``N1``, ``N2``… in order of
    first appearance: a copy's messages equal its original's this way."""
    names: dict[str, str] = {}
    text = ULID.sub(lambda m: names.setdefault(m.group(0), f"N{len(names) + 1}"), json.dumps(value))
    return json.loads(text)


def as_sent(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as a fake model records them (a JSON round trip)."""
    value: list[dict[str, Any]] = json.loads(json.dumps(messages, default=str))
    return value


def lookup(key: str) -> str:
    """Look up a key in the knowledge base.

    Args:
        key: what to look up, like ``k_3``
    """
    number = int(key.split("_")[1])
    size = 30_000 if number % 7 == 3 else (6_000 if number % 7 == 1 else 400)
    words = " ".join(f"w{i}" for i in range(size // 4))
    return f"value of {key}: {words} end of {key}"


def looping_model(
    rounds: int, then: Callable[[ModelRequest], Any] | str = "done", tool: str = "lookup"
) -> FunctionModel:
    """A model that calls ``tool`` with ``k_1`` … ``k_<rounds>`` (one call a turn), then
    answers with ``then`` (a reply or a function of the request)."""
    state = {"turn": 0}

    def reply(request: ModelRequest) -> Any:
        state["turn"] += 1
        turn = state["turn"]
        if turn <= rounds:
            call = tool_call(tool, {"key": f"k_{turn}"}, id=f"call_{tool}_{turn}")
            return {"content": f"step {turn}: looking up k_{turn}", "tool_calls": [call]}
        return then(request) if callable(then) else then

    return FunctionModel(reply)


def long_session(tmp_path: Path, db: str, rounds: int = 60, budget: int = 4_000) -> Session:
    """A session whose one ``llm`` call looked up ``rounds`` keys under a small budget:
    collapse, snip and offload all acted on the way."""
    session = Session(
        db,
        model=looping_model(rounds),
        system="You answer from the knowledge base.",
        budget=budget,
        # snip before compact (the preset's order is the other way), so snip's notes and
        # read_history show up in these sessions too
        policy=small_policy(
            tmp_path,
            cascade=(
                "offload",
                "budget_reduction",
                "microcompact",
                "collapse",
                "snip",
                "compact",
                "emergency",
            ),
        ),
        max_steps=rounds + 5,
    )
    assert session.llm("Collect every key.", tools=[lookup]) == "done"
    return session


def refuse_appending(monkeypatch: pytest.MonkeyPatch, content: str) -> None:
    """Make ``ConversationGraph.append`` refuse any message whose content is ``content``
    (as the graph refuses a bad record), for the rest of the test."""
    append = ConversationGraph.append

    def refusing(self: ConversationGraph, message: dict[str, Any], **kw: Any) -> Any:
        if message.get("content") == content:
            raise InvalidMessage("content", f"not {content}")
        return append(self, message, **kw)

    monkeypatch.setattr(ConversationGraph, "append", refusing)


def append_read_rounds(session: Session, start: int, count: int) -> None:
    """Append ``count`` rounds (a user turn, a ``Read`` call, its 80-line output), numbered
    from ``start``: enough history for tiers to act on under a small budget."""
    for i in range(start, start + count):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
        session.graph.append({"role": "user", "content": f"look at part {i}"})
        session.graph.append(
            {"role": "assistant", "content": f"reading part_{i}.py", "tool_calls": [call]}
        )
        session.graph.append(
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"def fn_{i}(): ...\n" * 80}
        )
