"""Anthropic Messages requests as the graph's chat messages, and the render back as a request.

Each message becomes entries the mirror stores (OpenAI chat messages): a user message's
``tool_result`` blocks one tool message each, its other blocks one user message; an
assistant message one message with its text and its ``tool_use`` blocks as calls. Each
entry keeps the client's own blocks, so whatever compaction left alone goes upstream
byte for byte as the client sent it: thinking blocks with their signatures, images,
``cache_control`` breakpoints with their ``ttl``. What compaction changed or made (a
summary, a cleared output) is built anew from the rendered message.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from graph import ChatMessage, FunctionCall, FunctionSchema, ToolCall, ToolSchema
from openprogram._errors import MalformedMessage
from openprogram._json import JSONObject, obj, objects
from openprogram._messages import AnthropicBlock, AnthropicMessage, ToolResultBlock
from openprogram.integrations._mirror import Entry, Paired
from openprogram.proxy._bodies import Request
from openprogram.proxy._breakpoint import MAX_BREAKPOINTS, mark_after
from openprogram.proxy._convert import Converted, Made, convert, first_user

__all__ = ["MAX_BREAKPOINTS", "Blocks", "from_request", "peek", "to_request"]


@dataclass(frozen=True)
class Blocks:
    """An entry's original: the client's role and content (a string or its blocks, passed
    on as they came), and the client's message it came from (None: made by compaction)."""

    role: str
    content: str | list[AnthropicBlock]
    source: int | None = None

    @functools.cached_property
    def marked(self) -> bool:
        """Whether a block carries a ``cache_control`` mark (kept with the entry: a later
        request's render asks again only of the blocks it has not seen)."""
        content = self.content
        return isinstance(content, list) and any(
            isinstance(block, dict) and "cache_control" in block for block in content
        )


def system_text(system: object) -> str | None:
    if system is None:
        return None
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n\n".join(
            str(block.get("text", "")) for block in system if isinstance(block, dict)
        )
    raise MalformedMessage("anthropic request: system is neither a string nor a list of blocks")


def block_text(block: object) -> str:
    """What a block says, as the graph stores it (a placeholder for what is not text)."""
    if not isinstance(block, dict):
        return str(block)
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_result":
        return content_text(block.get("content"))
    return f"[{kind}]"


def content_text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(block_text(block) for block in content)
    return str(content)


def _arguments(value: object) -> str:
    return json.dumps(value if value is not None else {}, ensure_ascii=False, sort_keys=True)


def _user(index: int, content: object) -> list[Entry]:
    if isinstance(content, str):
        return [
            Entry(
                {"role": "user", "content": content}, Blocks("user", content, index), {}, f"{index}"
            )
        ]
    if not isinstance(content, list):
        raise MalformedMessage(f"anthropic message {index}: content is not a string or a list")
    entries = []
    rest = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str) or not call_id:
                raise MalformedMessage(
                    f"anthropic message {index}: tool_result without tool_use_id"
                )
            text = content_text(block.get("content"))
            message: ChatMessage = {"role": "tool", "tool_call_id": call_id, "content": text}
            entries.append(
                Entry(
                    message,
                    Blocks("user", [cast("ToolResultBlock", block)], index),
                    {},
                    f"{index} tool_result",
                )
            )
        else:
            rest.append(block)
    if rest or not entries:
        text = "\n".join(block_text(block) for block in rest)
        entries.append(
            Entry({"role": "user", "content": text}, Blocks("user", rest, index), {}, f"{index}")
        )
    return entries


def _assistant(index: int, content: object) -> Entry:
    if isinstance(content, str):
        return Entry(
            {"role": "assistant", "content": content},
            Blocks("assistant", content, index),
            {},
            f"{index}",
        )
    if not isinstance(content, list):
        raise MalformedMessage(f"anthropic message {index}: content is not a string or a list")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            function: FunctionCall = {
                "name": str(block.get("name")),
                "arguments": _arguments(block.get("input")),
            }
            # a missing id is refused when the mirror checks the entries
            calls.append(
                cast("ToolCall", {"id": block.get("id"), "type": "function", "function": function})
            )
        elif isinstance(block, dict) and block.get("type") in ("thinking", "redacted_thinking"):
            continue  # sent back as it came; the provider does not count an old turn's
        else:
            texts.append(block_text(block))
    message: ChatMessage = {"role": "assistant", "content": "\n".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    return Entry(message, Blocks("assistant", content, index), {}, f"{index}")


def message_entries(index: int, message: object) -> list[Entry]:
    """The entries of one message (see the module docstring)."""
    fields = obj(message)
    role = fields.get("role")
    if role == "user":
        return _user(index, fields.get("content"))
    if role == "assistant":
        return [_assistant(index, fields.get("content"))]
    if role == "system":  # an instruction among the messages (Claude Code sends them)
        content = fields.get("content")
        said: ChatMessage = {"role": "system", "content": content_text(content)}
        given = cast("str | list[AnthropicBlock]", content)  # the client's, passed on as it came
        return [Entry(said, Blocks("system", given, index), {}, f"{index}")]
    raise MalformedMessage(
        f"anthropic message {index}: role {role!r} is not user, assistant or system"
    )


def _messages(body: Request) -> list[object]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise MalformedMessage("anthropic request: no messages list")
    return messages


def peek(body: Request) -> tuple[str, str]:
    """What recognises the conversation: the system prompt and the first user message."""
    for index, message in enumerate(_messages(body)):
        said = first_user(message_entries(index, message))
        if said:
            return system_text(body.get("system")) or "", said
    return system_text(body.get("system")) or "", ""


def from_request(body: Request, previous: Converted | None = None) -> Converted:
    """The request's messages as entries (reusing ``previous``'s for the messages it
    shares), its tools as schemas the budget counts."""
    messages = _messages(body)
    entries, parts = convert(messages, message_entries, previous)
    tools: list[ToolSchema] = []
    for tool in body.get("tools") or ():
        if not isinstance(tool, dict):
            continue
        schema = tool.get("input_schema") or {"type": "object"}
        function: FunctionSchema = {
            "name": str(tool.get("name") or tool.get("type")),
            "description": str(tool.get("description") or ""),
            "parameters": schema,
        }
        tools.append({"type": "function", "function": function})
    system = system_text(body.get("system"))
    return Converted(entries, tools, system, first_user(entries), messages, parts)


def _made(message: ChatMessage) -> Blocks:
    """Blocks for a message compaction changed or made."""
    role = message.get("role")
    content = message.get("content")
    text = content if isinstance(content, str) else content_text(content)
    if role == "tool":
        block: ToolResultBlock = {
            "type": "tool_result",
            "tool_use_id": cast(str, message.get("tool_call_id")),  # a tool message has one
            "content": text,
        }
        return Blocks("user", [block])
    blocks: list[AnthropicBlock] = [{"type": "text", "text": text}] if text else []
    if role == "assistant":
        for call in message.get("tool_calls") or ():
            try:
                arguments = json.loads(call["function"].get("arguments") or "{}")
            except ValueError:
                arguments = {"arguments": call["function"].get("arguments")}
            blocks.append(
                {"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
                 "input": arguments if isinstance(arguments, dict) else {"value": arguments}}
            )  # fmt: skip
        return Blocks("assistant", blocks or [{"type": "text", "text": "(no content)"}])
    return Blocks("user", blocks or [{"type": "text", "text": "(no content)"}])


def _as_list(content: str | list[AnthropicBlock]) -> list[AnthropicBlock]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def to_request(body: Request, paired: Sequence[Paired], made: Made | None = None) -> Request:
    """The request to send upstream: the client's body with the rendered messages and
    system prompt (the client's own blocks wherever the render left them alone; ``made``:
    the blocks the conversation's last request built for the rest)."""
    out: list[AnthropicMessage] = []
    last_role, last_source = "", None
    instructions: list[str] = []
    last_layer: AnthropicBlock | None = None
    layer_at = -1
    marked_at: list[int] = []  # the messages that hold a mark of the client's
    for item in paired:
        original = item.entry.original if item.entry is not None else None
        if isinstance(original, Blocks):
            blocks, shows_layer = original, False
        elif item.entry is None and item.message.get("role") == "system":
            instructions.append(content_text(item.message.get("content")))
            continue
        else:
            blocks = _made(item.message) if made is None else made.get(item.message, _made)
            shows_layer = item.layer is not None and original is None and bool(blocks.content)
            if shows_layer and isinstance(blocks.content, list):
                last_layer = blocks.content[-1]
        role, source = blocks.role, blocks.source
        # Parts of one client message go back together; what compaction made joins its
        # neighbour of the same role (the API would join them anyway).
        if role == last_role and (source is None or last_source is None or source == last_source):
            merged = _as_list(out[-1]["content"]) + _as_list(blocks.content)
            merged.sort(key=lambda b: b.get("type") != "tool_result")  # results first
            out[-1] = {"role": role, "content": merged}
            last_source = source if last_source is None else last_source
        else:
            out.append({"role": role, "content": blocks.content})
            last_role, last_source = role, source
        if shows_layer:
            layer_at = len(out) - 1
        elif blocks is original and blocks.marked and marked_at[-1:] != [len(out) - 1]:
            marked_at.append(len(out) - 1)
    if made is not None:
        made.done()
    request: Request = {**body, "messages": [*out]}
    system = body.get("system")
    kept = system_text(system)
    if instructions != ([kept] if kept is not None else []):
        own: list[object] = []
        if isinstance(system, str | list) and kept in instructions:
            own = [{"type": "text", "text": system}] if isinstance(system, str) else list(system)
        new = [{"type": "text", "text": text} for text in instructions if text and text != kept]
        request["system"] = [*own, *new]
        if not request["system"]:
            del request["system"]
    marks = limit_breakpoints(request, marked_at)
    mark_after(request, last_layer, marks=marks, at=layer_at)
    return request


def limit_breakpoints(request: Request, holding: Sequence[int] | None = None) -> int:
    """Keep at most :data:`MAX_BREAKPOINTS` ``cache_control`` marks (the system's and the
    tools' first, then the newest messages'); a mark dropped is only taken off its block.
    ``holding``: the only messages with a mark (in order; None: any may have one). Returns
    the marks kept."""
    marked: list[JSONObject] = []
    front = objects(request.get("system")) + objects(request.get("tools"))
    for block in front:
        if "cache_control" in block:
            marked.append(block)
    in_messages: list[JSONObject] = []
    messages = request["messages"]
    for at in reversed(range(len(messages)) if holding is None else holding):
        content = obj(messages[at]).get("content")
        if isinstance(content, list):
            in_messages += [
                b for b in reversed(content) if isinstance(b, dict) and "cache_control" in b
            ]
    marked += in_messages
    for block in marked[MAX_BREAKPOINTS:]:
        _unmark(request, block)
    return min(len(marked), MAX_BREAKPOINTS)


def _unmark(request: Request, block: JSONObject) -> None:
    """Take the mark off ``block`` (a copy: the client's own blocks are never changed)."""
    for message in request["messages"]:
        if isinstance(message, dict) and isinstance(content := message["content"], list):
            for n, candidate in enumerate(content):
                if candidate is block:
                    copy = dict(block)
                    del copy["cache_control"]
                    message["content"] = [*content[:n], copy, *content[n + 1 :]]
                    return
