"""Claude Code session JSONL: one record per line, the conversation in user/assistant records.

Claude Code writes one API response as several assistant records (one content block each, same
``message.id``), and parallel tool results may arrive between them. We hold a response until a
record of another response arrives, so each response becomes one assistant message followed by
its tool messages, and every tool message comes after the call it answers.

The provider's token usage rides along as ``meta["usage"]`` (``input``, ``cache_read``,
``cache_creation``, ``output``) on the assistant message of its response, once per response:
the bench anchors its token estimates on it, and a response split in two must not count twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from graph import ChatMessage, FunctionCall, ToolCall
from openprogram.importers._model import Imported
from openprogram.importers._reading import (
    Bad,
    Reading,
    flatten_text,
    get,
    get_call_id,
    get_name,
    opt,
    parse_lines,
    parse_time,
)

__all__ = ["read_claude_code"]

_USAGE = {
    "input": "input_tokens",
    "cache_read": "cache_read_input_tokens",
    "cache_creation": "cache_creation_input_tokens",
    "output": "output_tokens",
}


def read_claude_code(path: Path, *, skip_bad: bool = False) -> Reading:
    """Read a Claude Code session file (``~/.claude/projects/*/<session>.jsonl``)."""
    return Reading(path, _parse, skip_bad=skip_bad)


class _Response:
    """One assistant API response, collected over its consecutive records."""

    def __init__(self, record: Mapping[str, object], reading: Reading) -> None:
        message = get(record, "message", dict, "$")
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise Bad("$.message.content", "expected a list of content blocks")
        self.id = opt(message, "id", str, "$.message")
        self.at = _at(record)
        self.meta = _common_meta(record) | _response_meta(record, message)
        if "usage" in message:
            usage = _usage(message["usage"])
            if usage is None:
                reading.warn("ignored a malformed message.usage (expected token counts)")
            else:
                self.meta["usage"] = usage
        self.sidechain = bool(self.meta.pop("sidechain"))
        self.texts: list[str] = []
        self.thinking: list[str] = []
        self.calls: list[ToolCall] = []
        self.results: list[Imported] = []
        for i, block in enumerate(blocks):
            self._add(block, f"$.message.content[{i}]", reading)

    def _add(self, block: object, where: str, reading: Reading) -> None:
        if not isinstance(block, dict):
            raise Bad(where, "expected a content block object")
        btype = block.get("type")
        if btype == "text":
            self.texts.append(get(block, "text", str, where))
        elif btype == "thinking":
            self.thinking.append(get(block, "thinking", str, where))
        elif btype == "tool_use":
            call_id = get_call_id(block, "id", where)
            name = get_name(block, "name", where)
            arguments = json.dumps(get(block, "input", dict, where), ensure_ascii=False)
            function: FunctionCall = {"name": name, "arguments": arguments}
            self.calls.append({"id": call_id, "type": "function", "function": function})
        else:
            reading.warn(f"ignored assistant content block of type {btype!r}")

    def continues(self, later: _Response) -> bool:
        return later.id is not None and later.id == self.id and later.sidechain == self.sidechain

    def merge(self, later: _Response) -> None:
        """Take in a later record of the same response; its usage is the more complete one."""
        self.texts += later.texts
        self.thinking += later.thinking
        self.calls += later.calls
        self.meta |= {key: value for key, value in later.meta.items() if key != "uuid"}

    def answers(self, results: list[Imported]) -> bool:
        ids = {call["id"] for call in self.calls}
        return all(result.message["tool_call_id"] in ids for result in results)

    def emit(self, counted: set[str]) -> Iterator[Imported]:
        """The assistant message, then its tool results; ``counted`` holds the ids of responses
        whose usage is already on a message (a response split by other records is not billed
        twice)."""
        if self.id is not None:
            if self.id in counted:
                self.meta.pop("usage", None)
            elif "usage" in self.meta:
                counted.add(self.id)
        message: ChatMessage = {"role": "assistant", "content": "\n\n".join(self.texts)}
        if self.calls:
            message["tool_calls"] = self.calls
        if self.thinking:
            message["thinking"] = "\n\n".join(self.thinking)
        yield Imported(message=message, at=self.at, meta=self.meta, sidechain=self.sidechain)
        yield from self.results


_Piece = _Response | tuple[list[Imported], Imported | None] | Imported | None


def _parse(path: Path, reading: Reading) -> Iterator[Imported]:
    return parse_lines(path, reading, claude_code_lines(reading))


def claude_code_lines(reading: Reading) -> _Lines:
    """A parser fed one line at a time (what ``openprogram mcp --follow`` keeps)."""
    return _Lines(reading)


class _Lines:
    """The records of a Claude Code file, line by line: a response is held until a record of
    another response arrives (or the file ends), since a later record may still extend it."""

    def __init__(self, reading: Reading) -> None:
        self.reading = reading
        self.response: _Response | None = None
        self.counted: set[str] = set()

    def feed(self, number: int, record: Mapping[str, object]) -> Iterator[Imported]:
        reading = self.reading
        rtype = record.get("type")
        if rtype not in ("user", "assistant", "system"):
            return  # progress, file-history-snapshot, summary, queue-operation, ...
        if reading.session_id is None and isinstance(session := record.get("sessionId"), str):
            reading.session_id = session
        piece: _Piece
        try:
            if rtype == "assistant":
                piece = _Response(record, reading)
            elif rtype == "user":
                piece = _user(record)
            else:
                piece = _system(record)
        except Bad as error:
            reading.bad(f"line {number}, {error.where}", error.problem)
            return
        if piece is None:
            return
        response = self.response
        if isinstance(piece, _Response):
            if response is not None and response.continues(piece):
                response.merge(piece)
                return
            if response is not None:
                yield from response.emit(self.counted)
            self.response = piece
            return
        if isinstance(piece, tuple):
            results, text = piece
            if response is not None and text is None and results and response.answers(results):
                response.results += results  # a later record of this response may still come
                return
        if response is not None:
            yield from response.emit(self.counted)
            self.response = None
        if isinstance(piece, Imported):
            yield piece
        else:
            yield from results
            if text is not None:
                yield text

    def end(self) -> Iterator[Imported]:
        if self.response is not None:
            yield from self.response.emit(self.counted)
            self.response = None


def _at(record: Mapping[str, object]) -> datetime | None:
    return parse_time(record.get("timestamp"), "$.timestamp")


def _common_meta(record: Mapping[str, object]) -> dict[str, Any]:
    meta: dict[str, Any] = {"sidechain": record.get("isSidechain") is True}
    if isinstance(record.get("uuid"), str):
        meta["uuid"] = record["uuid"]
    return meta


def _response_meta(record: Mapping[str, object], message: Mapping[str, object]) -> dict[str, Any]:
    """Model and ids; later records of a response overwrite usage (its output count grows)."""
    meta = {
        "model": message.get("model"),
        "message_id": message.get("id"),
        "request_id": record.get("requestId"),
    }
    return {key: value for key, value in meta.items() if value is not None}


def _user(record: Mapping[str, object]) -> tuple[list[Imported], Imported | None]:
    """Tool messages for the record's tool_result blocks, then a user message for its text."""
    message = get(record, "message", dict, "$")
    content = message.get("content")
    at = _at(record)
    meta = _common_meta(record)
    sidechain = meta.pop("sidechain")
    if record.get("isMeta") is True:
        meta["is_meta"] = True
    results: list[Imported] = []
    texts: list[Any] = []
    if isinstance(content, list):
        for i, block in enumerate(content):
            where = f"$.message.content[{i}]"
            if isinstance(block, dict) and block.get("type") == "tool_result":
                tool: ChatMessage = {
                    "role": "tool",
                    "tool_call_id": get_call_id(block, "tool_use_id", where),
                    "content": flatten_text(block.get("content"), f"{where}.content"),
                    "is_error": opt(block, "is_error", bool, where) is True,
                }
                results.append(Imported(message=tool, at=at, meta=dict(meta), sidechain=sidechain))
            else:
                texts.append(block)
    elif content is not None and not isinstance(content, str):
        raise Bad("$.message.content", "expected a string or a list of content blocks")
    else:
        texts = [content] if content else []
    text = flatten_text(texts, "$.message.content")
    if not text:
        return results, None
    summary = record.get("isCompactSummary") is True
    user = Imported(
        message={"role": "user", "content": text},
        at=at,
        meta=meta,
        marker="compact_summary" if summary else None,
        sidechain=sidechain,
    )
    return results, user


def _system(record: Mapping[str, object]) -> Imported | None:
    """A compaction boundary marker; other system records (hooks, timings, errors) are noise."""
    if record.get("subtype") != "compact_boundary":
        return None
    meta = _common_meta(record)
    sidechain = meta.pop("sidechain")
    details = record.get("compactMetadata")
    described = "Conversation compacted"
    if isinstance(details, dict):
        meta["compact"] = details
        trigger, tokens = details.get("trigger"), details.get("preTokens")
        if trigger is not None or tokens is not None:
            described += f" ({trigger or 'unknown'} trigger, {tokens or '?'} tokens before)"
    message: ChatMessage = {"role": "system", "content": described}
    return Imported(
        message=message,
        at=_at(record),
        meta=meta,
        marker="compact_boundary",
        sidechain=sidechain,
    )


def _usage(raw: object) -> dict[str, int] | None:
    """Anthropic usage as our four counts; None unless every present count is a whole number."""
    if not isinstance(raw, dict) or "input_tokens" not in raw:
        return None
    usage: dict[str, int] = {}
    for ours, theirs in _USAGE.items():
        value = raw.get(theirs)
        if value is None:
            value = 0
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return None
        usage[ours] = value
    return usage
