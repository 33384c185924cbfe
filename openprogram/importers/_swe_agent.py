"""SWE-agent ``.traj`` files: ``{environment, trajectory, history, info}``.

``history`` is the chat the model saw, already OpenAI-shaped, so each entry goes through the
shared ``chat_message``. What is SWE-agent's own: few-shot demonstrations (``is_demo``), which
are not part of the run and are dropped, tool replies that name their calls in a
``tool_call_ids`` list, and bookkeeping keys (``thought``, ``action``, ``agent``,
``message_type``) kept as meta.

Older trajectories (most published SWE-bench runs) have no ``tool_calls``: the assistant's
``action`` was run and its output came back as the next user message. Like mini-swe-agent's
bash blocks, we turn that convention into a tool call and its result, so these runs pair calls
and outputs like every other format and the tool-compaction tiers can reach them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypeGuard, cast

from graph import ChatMessage, FunctionCall, ToolCall
from openprogram.importers._model import Imported
from openprogram.importers._openai import chat_message
from openprogram.importers._reading import Bad, Reading, flatten_text, load_document, opt

__all__ = ["read_swe_agent"]

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_QUOTED = re.compile(r"'[^']*'|\"(?:\\.|[^\"\\])*\"")
_SHELL = re.compile(r"[|&;<>`$()]")
_BLOCK = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)


def read_swe_agent(path: Path, *, skip_bad: bool = False) -> Reading:
    """Read a SWE-agent trajectory (``*.traj``), function-calling or plain."""
    return Reading(path, _parse, skip_bad=skip_bad)


def _parse(path: Path, reading: Reading) -> Iterator[Imported]:
    _, history = load_document(path, "history")
    reading.session_id = path.name.removesuffix(".traj")
    waiting: str | None = None  # the call whose output the next user message holds
    for i, raw in enumerate(history):
        if isinstance(raw, dict) and raw.get("is_demo") is True:
            continue
        where = f"$.history[{i}]"
        call_id, waiting = waiting, None
        try:
            if call_id is not None and isinstance(raw, dict) and raw.get("role") == "user":
                out = [_observation(raw, call_id, where)]
            else:
                out, waiting = _entry(raw, where, reading, f"action_{i}")
        except Bad as error:
            reading.bad(error.where, error.problem)
            continue
        yield from out


def _entry(
    raw: object, where: str, reading: Reading, call_id: str
) -> tuple[list[Imported], str | None]:
    """The messages of one history entry, and the call id its observation will answer."""
    if isinstance(raw, dict) and raw.get("role") == "tool" and "tool_call_ids" in raw:
        return _tool_replies(raw, where, reading), None
    message, extra = chat_message(raw, where)
    if extra.get("thought") == message["content"]:
        del extra["thought"]  # the function-calling variant repeats the content there
    action = extra.get("action")
    if message["role"] == "assistant" and "tool_calls" not in message and _is_action(action):
        return [_action_call(message, extra, action, call_id)], call_id
    return [Imported(message=message, meta=extra)], None


def _is_action(action: object) -> TypeGuard[str]:
    return isinstance(action, str) and bool(action.strip())


def _action_call(
    message: ChatMessage, extra: dict[str, Any], action: str, call_id: str
) -> Imported:
    """An older-form assistant turn: its thought as content, its action as one tool call."""
    thought = extra.pop("thought", None)
    del extra["action"]
    if isinstance(thought, str) and thought.strip():
        content = thought.strip()
    else:
        content = _without_block(cast(str, message["content"]), action)  # chat_message flattens it
    arguments = json.dumps({"command": action}, ensure_ascii=False)
    function: FunctionCall = {"name": _tool_name(action), "arguments": arguments}
    call: ToolCall = {"id": call_id, "type": "function", "function": function}
    reply: ChatMessage = {**message, "content": content, "tool_calls": [call]}
    return Imported(message=reply, meta=extra)


def _tool_name(action: str) -> str:
    """The action's command word (``open``, ``edit``, ``python``), or ``bash`` for a shell line
    that is more than one plain command (pipes, lists, redirections, substitutions)."""
    first = action.strip().split("\n", 1)[0]
    word = first.split(maxsplit=1)[0]
    if _WORD.fullmatch(word) and not _SHELL.search(_QUOTED.sub("", first)):
        return word
    return "bash"


def _without_block(content: str, action: str) -> str:
    """The content without the fenced block that repeats the action, when there is one."""
    blocks = list(_BLOCK.finditer(content))
    for block in reversed(blocks):
        if block.group(1).strip() == action.strip():
            return (content[: block.start()] + content[block.end() :]).strip()
    return content


def _observation(raw: Mapping[str, object], call_id: str, where: str) -> Imported:
    """The user message that carried an action's output, as that call's tool result."""
    content = flatten_text(raw.get("content"), f"{where}.content")
    meta = {key: value for key, value in raw.items() if key not in ("role", "content")}
    message: ChatMessage = {"role": "tool", "tool_call_id": call_id, "content": content}
    return Imported(message=message, meta=meta)


def _tool_replies(raw: Mapping[str, object], where: str, reading: Reading) -> list[Imported]:
    """One tool message per id; SWE-agent runs one call per turn, so extra ids get no text."""
    ids = opt(raw, "tool_call_ids", list, where) or []
    if not ids or not all(isinstance(call_id, str) and call_id for call_id in ids):
        raise Bad(f"{where}.tool_call_ids", "expected a non-empty list of call id strings")
    content = flatten_text(raw.get("content"), f"{where}.content")
    meta = {key: value for key, value in raw.items() if key not in ("role", "content")}
    if len(ids) > 1:
        reading.warn("a tool reply answers several calls; its text goes to the first one")
    return [
        Imported(
            message={"role": "tool", "tool_call_id": call_id, "content": content if n == 0 else ""},
            meta=meta,
        )
        for n, call_id in enumerate(ids)
    ]
