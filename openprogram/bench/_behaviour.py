"""``bench --behaviour MODEL``: does the compacted prompt lead to the same next action?

Identifier recall is a proxy for what compaction loses. This check asks a model directly: on
sampled turns whose history exceeds the budget (where compaction had to act), the model is
given the full history and, separately, the compacted prompt, each time asked for the agent's
next action (a tool call or an answer). The row reports how often the two agree, and how often
each agrees with the action the agent really took.

Both prompts are shown to the model the same way — system messages as they are, the rest as a
transcript in one user message — so no provider refuses a tool history without its schemas,
and the comparison is between contents, not formats. Each sampled turn costs two calls: one
with the full history (up to the trace's whole length) and one with the compacted prompt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import msgspec

from graph import ChatMessage
from openprogram._runtime._history import messages_text
from openprogram._runtime._models import Model
from openprogram.bench._metrics import Turn

__all__ = ["ASK", "Action", "BehaviourRow", "action_of", "agree", "ask_next_action", "check"]

ASK = (
    "Above is an AI agent's conversation so far. Decide the agent's next action and reply "
    'with only a JSON object: {"tool": the tool\'s name or null, "arguments": the call\'s '
    'arguments or {}, "answer": the reply to the user or null}.'
)
_TARGETS = ("file_path", "path", "command", "cmd", "pattern", "query", "url", "filename")
_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.S)


class Action(NamedTuple):
    """A next action reduced to what decides it: the tool (None: an answer) and its target
    (the file, command or query it acts on, when it has one)."""

    tool: str | None
    target: str = ""


class BehaviourRow(msgspec.Struct, frozen=True):
    """One trace under one policy: agreement shares over ``sampled`` turns (None: no turn)."""

    trace: str
    policy: str
    budget: int
    sampled: int
    agreement: float | None
    full_vs_real: float | None
    compacted_vs_real: float | None
    failed: int
    calls: int
    tokens_in: int
    tokens_out: int


def _target(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return " ".join(arguments.split())[:200]
    if not isinstance(arguments, dict):
        return ""
    for key in _TARGETS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())[:200]
    return ""


def action_of(message: ChatMessage) -> Action:
    """The action an assistant message took: its first tool call, else an answer."""
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        return Action(str(function.get("name")), _target(function.get("arguments")))
    return Action(None)


def parse_action(text: str) -> Action:
    """A model's reply to :data:`ASK` as an action (``?`` when it is not the JSON asked for)."""
    fenced = _FENCE.search(text)
    raw = fenced.group(1) if fenced else text.strip()
    start, end = raw.find("{"), raw.rfind("}")
    try:
        value = json.loads(raw[start : end + 1]) if start >= 0 else None
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        return Action("?")
    tool = value.get("tool")
    if tool in (None, "", "null"):
        return Action(None)
    return Action(str(tool), _target(value.get("arguments")))


def agree(one: Action, other: Action) -> bool:
    """Same tool on the same target (a target only one side names does not disagree)."""
    if one.tool != other.tool or "?" in (one.tool, other.tool):
        return False
    return not (one.target and other.target) or one.target == other.target


def as_question(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """A prompt as the model is asked it: system messages, then one transcript and the ask."""
    systems = [m for m in messages if m.get("role") == "system"]
    rest = [m for m in messages if m.get("role") != "system"]
    return [*systems, {"role": "user", "content": f"{messages_text(rest)}\n\n{ASK}"}]


def ask_next_action(model: Model, messages: Sequence[ChatMessage]) -> tuple[Action, int, int]:
    """The model's next action for ``messages``, with the input and output tokens it used."""
    response = model.complete(as_question(messages), [])
    content = response.message.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    return parse_action(text or ""), response.usage.input_tokens, response.usage.output_tokens


def sample_turns(turns: Sequence[Turn], budget: int, count: int) -> list[int]:
    """Up to ``count`` turns whose history exceeds the budget, evenly spread (deterministic)."""
    over = [i for i, turn in enumerate(turns) if turn.history_tokens > budget]
    if len(over) <= count:
        return over
    step = len(over) / count
    return [over[int(step * k + step / 2)] for k in range(count)]


def check(
    turns: Sequence[Turn],
    model: Model,
    *,
    trace: str,
    policy: str,
    budget: int,
    samples: int = 8,
    progress: Callable[[], None] | None = None,
) -> BehaviourRow:
    """The behaviour row of one replay (its turns, as ``run_policy``'s ``on_turn`` saw them)."""
    chosen = sample_turns(turns, budget, samples)
    agreed = full_real = compacted_real = failed = calls = tokens_in = tokens_out = 0
    for index in chosen:
        turn = turns[index]
        try:
            full, full_in, full_out = ask_next_action(model, turn.history)
            compacted, compacted_in, compacted_out = ask_next_action(model, turn.prompt)
        except Exception:  # a provider error (a history over the model's window, say)
            failed += 1
            calls += 2
            continue
        finally:
            if progress is not None:
                progress()
        calls += 2
        tokens_in += full_in + compacted_in
        tokens_out += full_out + compacted_out
        real = action_of(turn.assistant)
        agreed += agree(full, compacted)
        full_real += agree(full, real)
        compacted_real += agree(compacted, real)
    answered = len(chosen) - failed

    def share(hits: int) -> float | None:
        return hits / answered if answered else None

    return BehaviourRow(
        trace=trace,
        policy=policy,
        budget=budget,
        sampled=len(chosen),
        agreement=share(agreed),
        full_vs_real=share(full_real),
        compacted_vs_real=share(compacted_real),
        failed=failed,
        calls=calls,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
    )
