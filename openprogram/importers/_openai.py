"""OpenAI chat messages saved as a JSON list, a ``{"messages": [...]}`` object, or JSONL.

This is also the target shape of every importer, so ``chat_message`` (validate one message and
bring it to the canonical form) is shared with the SWE-agent reader, whose history is OpenAI-like.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

from graph import ChatMessage
from openprogram._errors import TraceFormatError
from openprogram.importers._model import Imported
from openprogram.importers._reading import (
    Bad,
    Reading,
    flatten_text,
    get,
    get_call_id,
    kind,
    load_json,
    opt,
    parse_lines,
    parse_time,
    tool_call,
)

__all__ = ["chat_message", "is_jsonl", "looks_like_jsonl", "openai_lines", "read_openai"]

_ROLES: dict[str, Literal["system", "user", "assistant", "tool"]] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}
_HANDLED = {"role", "content", "tool_calls", "tool_call_id", "is_error", "timestamp", "created_at"}
_THINKING = ("thinking", "reasoning_content", "reasoning")


def read_openai(path: Path, *, skip_bad: bool = False) -> Reading:
    """Read a file of OpenAI chat messages (JSON list, ``{"messages": [...]}`` or JSONL)."""
    return Reading(path, _parse, skip_bad=skip_bad)


def chat_message(raw: object, where: str) -> tuple[ChatMessage, dict[str, Any]]:
    """One chat message in canonical form, and its other keys (kept as meta).

    Canonical: ``content`` is a string (parts flattened), ``developer`` becomes ``system``,
    tool call ``arguments`` are JSON strings, and reasoning under any common key is ``thinking``.
    """
    if not isinstance(raw, dict):
        raise Bad(where, f"expected a message object, got {kind(raw)}")
    given = get(raw, "role", str, where)
    if given not in _ROLES:
        raise Bad(f"{where}.role", f"expected one of {sorted(_ROLES)}, got {given!r}")
    role = _ROLES[given]
    content = flatten_text(raw.get("content"), f"{where}.content")
    message: ChatMessage = {"role": role, "content": content}
    extra = {key: value for key, value in raw.items() if key not in _HANDLED}
    if role == "assistant":
        calls = opt(raw, "tool_calls", list, where)
        if calls:
            message["tool_calls"] = [
                tool_call(call, f"{where}.tool_calls[{i}]") for i, call in enumerate(calls)
            ]
        thinking = _thinking(raw)
        if thinking:
            message["thinking"] = thinking
            for key in (*_THINKING, "thinking_blocks"):
                extra.pop(key, None)
    elif role == "tool":
        message["tool_call_id"] = get_call_id(raw, "tool_call_id", where)
        is_error = opt(raw, "is_error", bool, where)
        if is_error is not None:
            message["is_error"] = is_error
    return message, extra


def looks_like_jsonl(path: Path) -> bool:
    """True when the first non-blank line is a whole message object, as in JSONL."""
    with path.open("rb") as lines:
        for line in lines:
            if line.strip():
                try:
                    first = msgspec.json.decode(line)
                except msgspec.DecodeError:
                    return False
                except RecursionError:
                    return True  # a whole value on one line: a record for iter_jsonl to report
                return isinstance(first, dict) and "role" in first
    return False


def is_jsonl(path: Path) -> bool:
    """Whether this file is read as JSONL (one message a line), not as one JSON document."""
    return path.suffix == ".jsonl" or looks_like_jsonl(path)


def openai_lines(reading: Reading) -> _Lines:
    """A JSONL parser fed one line at a time (what ``openprogram mcp --follow`` keeps)."""
    reading.session_id = reading.path.stem
    return _Lines(reading)


class _Lines:
    """The messages of an OpenAI JSONL file, one a line."""

    def __init__(self, reading: Reading) -> None:
        self.reading = reading

    def feed(self, number: int, record: Mapping[str, object]) -> Iterator[Imported]:
        if "messages" in record and "role" not in record:
            path = str(self.reading.path)
            raise TraceFormatError(path, f"line {number}", "expected one message per line")
        try:
            yield _imported(record, "$")
        except Bad as error:
            self.reading.bad(f"line {number}, {error.where}", error.problem)

    def end(self) -> Iterator[Imported]:
        return iter(())


def _thinking(raw: Mapping[str, object]) -> str:
    for key in _THINKING:
        if isinstance(raw.get(key), str) and raw[key]:
            return str(raw[key])
    blocks = raw.get("thinking_blocks")
    if isinstance(blocks, list):
        texts = [block.get("thinking") for block in blocks if isinstance(block, dict)]
        return "\n\n".join(text for text in texts if isinstance(text, str))
    return ""


def _imported(raw: object, where: str) -> Imported:
    message, extra = chat_message(raw, where)
    stamp = raw.get("timestamp", raw.get("created_at")) if isinstance(raw, dict) else None
    return Imported(message=message, at=parse_time(stamp, f"{where}.timestamp"), meta=extra)


def _parse(path: Path, reading: Reading) -> Iterator[Imported]:
    reading.session_id = path.stem
    if is_jsonl(path):
        yield from parse_lines(path, reading, _Lines(reading))
        return
    document = load_json(path)
    where = "$"
    if isinstance(document, dict):
        messages = document.get("messages")
        where = "$.messages"
        if isinstance(document.get("id"), str):
            reading.session_id = document["id"]
    else:
        messages = document
    if not isinstance(messages, list):
        problem = 'expected a list of messages or an object with a "messages" list'
        raise TraceFormatError(str(path), where, f"{problem}, got {kind(messages)}")
    for i, raw in enumerate(messages):
        try:
            yield _imported(raw, f"{where}[{i}]")
        except Bad as error:
            reading.bad(error.where, error.problem)
