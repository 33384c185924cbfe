"""Codex CLI rollout JSONL: ``{timestamp, type, payload}`` records, the conversation in
``response_item`` payloads (OpenAI Responses API items).

Responses items are flatter than chat messages: reasoning, text and each tool call are separate
items. We fold them back into chat shape: reasoning becomes the ``thinking`` of the assistant
message that follows it, and tool calls join the assistant message just before them (or an
empty one), so the result pairs calls and outputs like a chat transcript.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from graph import ChatMessage, ToolCall
from openprogram.importers._model import Imported
from openprogram.importers._reading import (
    Bad,
    Reading,
    flatten_text,
    get,
    get_call_id,
    get_name,
    kind,
    opt,
    parse_lines,
    parse_time,
)

__all__ = ["read_codex"]

_ROLES: dict[str, Literal["user", "assistant", "system"]] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
}
_IGNORED = {"session_meta", "turn_context", "event_msg"}


def read_codex(path: Path, *, skip_bad: bool = False) -> Reading:
    """Read a Codex CLI rollout (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``)."""
    return Reading(path, _parse, skip_bad=skip_bad)


class _State:
    """The assistant message still open to tool calls, and reasoning waiting for a message."""

    def __init__(self) -> None:
        self.open: Imported | None = None
        self.thinking: list[str] = []
        self.model: str | None = None

    def close(self) -> Iterator[Imported]:
        if self.open is not None:
            yield self.open
            self.open = None

    def assistant(self, content: str, at: datetime | None, meta: dict[str, Any]) -> Imported:
        message: ChatMessage = {"role": "assistant", "content": content}
        if self.thinking:
            message["thinking"] = "\n\n".join(self.thinking)
            self.thinking = []
        if self.model is not None:
            meta = {"model": self.model} | meta
        return Imported(message=message, at=at, meta=meta)

    def call(self, call: ToolCall, at: datetime | None) -> None:
        if self.open is None:
            self.open = self.assistant("", at, {})
        elif self.thinking:
            thinking = [self.open.message.get("thinking", ""), *self.thinking]
            self.open.message["thinking"] = "\n\n".join(part for part in thinking if part)
            self.thinking = []
        self.open.message.setdefault("tool_calls", []).append(call)


def _parse(path: Path, reading: Reading) -> Iterator[Imported]:
    return parse_lines(path, reading, codex_lines(reading))


def codex_lines(reading: Reading) -> _Lines:
    """A parser fed one line at a time (what ``openprogram mcp --follow`` keeps)."""
    return _Lines(reading)


class _Lines:
    """The records of a Codex rollout, line by line: an assistant message is held while
    later function calls may still join it."""

    def __init__(self, reading: Reading) -> None:
        self.reading = reading
        self.state = _State()

    def feed(self, number: int, record: Mapping[str, object]) -> Iterator[Imported]:
        reading, state = self.reading, self.state
        rtype = record.get("type")
        try:
            payload = get(record, "payload", dict, "$")
            if rtype == "session_meta" and reading.session_id is None:
                reading.session_id = opt(payload, "id", str, "$.payload")
            elif rtype == "turn_context":
                state.model = opt(payload, "model", str, "$.payload") or state.model
            if isinstance(rtype, str) and rtype in _IGNORED:
                return
            at = parse_time(record.get("timestamp"), "$.timestamp")
            out: list[Imported] | None
            if rtype == "compacted":
                out = _compacted(payload, at)
            elif rtype == "response_item":
                out = _item(payload, at, state, reading)
            else:
                reading.warn(f"ignored record type {rtype!r}")
                return
        except Bad as error:
            reading.bad(f"line {number}, {error.where}", error.problem)
            return
        if out is None:
            return  # folded into the open assistant message
        yield from state.close()
        if out and out[0].message["role"] == "assistant" and not out[0].marker:
            state.open = out[0]  # later function calls may still join it
            return
        yield from out

    def end(self) -> Iterator[Imported]:
        yield from self.state.close()


def _compacted(payload: Mapping[str, object], at: datetime | None) -> list[Imported]:
    """A native compaction: a boundary marker, then Codex's summary when it wrote one."""
    boundary: ChatMessage = {"role": "system", "content": "Conversation compacted"}
    out = [Imported(message=boundary, at=at, marker="compact_boundary")]
    summary = opt(payload, "message", str, "$.payload")
    if summary:
        user: ChatMessage = {"role": "user", "content": summary}
        out.append(Imported(message=user, at=at, marker="compact_summary"))
    return out


def _item(
    payload: Mapping[str, object], at: datetime | None, state: _State, reading: Reading
) -> list[Imported] | None:
    """The messages one response item yields; None when it only updates ``state``."""
    itype = payload.get("type")
    where = "$.payload"
    if itype == "message":
        role = get(payload, "role", str, where)
        if role not in _ROLES:
            raise Bad(f"{where}.role", f"expected one of {sorted(_ROLES)}, got {role!r}")
        content = flatten_text(payload.get("content"), f"{where}.content")
        if _ROLES[role] == "assistant":
            return [state.assistant(content, at, _ids(payload))]
        return [Imported(message={"role": _ROLES[role], "content": content}, at=at)]
    if itype == "reasoning":
        state.thinking += _reasoning(payload)
        return None
    if itype in ("function_call", "custom_tool_call", "local_shell_call"):
        state.call(_call(payload, itype), at)
        return None
    if itype in ("function_call_output", "custom_tool_call_output"):
        return [Imported(message=_output(payload), at=at)]
    reading.warn(f"ignored response item type {itype!r}")
    return []


def _ids(payload: Mapping[str, object]) -> dict[str, Any]:
    item_id = payload.get("id")
    return {"item_id": item_id} if isinstance(item_id, str) else {}


def _reasoning(payload: Mapping[str, object]) -> list[str]:
    """Readable reasoning (summary, else raw text); encrypted-only reasoning gives nothing."""
    for key in ("summary", "content"):
        parts = payload.get(key)
        if isinstance(parts, list):
            text = flatten_text([p for p in parts if isinstance(p, dict) and "text" in p], key)
            if text:
                return [text]
    return []


def _call(payload: Mapping[str, object], itype: str) -> ToolCall:
    where = "$.payload"
    call_id = get_call_id(payload, "call_id", where)
    if itype == "function_call":
        name = get_name(payload, "name", where)
        arguments = get(payload, "arguments", str, where)
    elif itype == "custom_tool_call":
        # Free-form tools (apply_patch) take raw text; wrap it so arguments stay JSON.
        name = get_name(payload, "name", where)
        arguments = json.dumps({"input": get(payload, "input", str, where)}, ensure_ascii=False)
    else:
        name = "local_shell"
        arguments = json.dumps(get(payload, "action", dict, where), ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _output(payload: Mapping[str, object]) -> ChatMessage:
    where = "$.payload"
    message: ChatMessage = {
        "role": "tool",
        "tool_call_id": get_call_id(payload, "call_id", where),
    }
    output = payload.get("output")
    if isinstance(output, dict):  # older rollouts: {content, success}
        message["content"] = flatten_text(output.get("content"), f"{where}.output.content")
        if isinstance(output.get("success"), bool):
            message["is_error"] = not output["success"]
    elif isinstance(output, str | list):
        message["content"] = flatten_text(output, f"{where}.output")
    else:
        raise Bad(f"{where}.output", f"expected a string or content parts, got {kind(output)}")
    return message
