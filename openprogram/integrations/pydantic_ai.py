"""OpenProgram as a Pydantic AI capability: each model request gets the compacted history.

    agent = Agent(model, capabilities=[OpenProgramCapability(Session("agent.db"))])

The capability wraps each model request (``wrap_model_request``) and changes only that
request's messages: the run's own history (``ctx.messages``, ``result.all_messages()``)
stays whole, unlike a history processor, which writes its result back into it. Every
message is stored in the session's graph (request parts and responses; tool calls and
their returns as tool nodes), and the request goes out with the session's render of it —
the framework's original messages for what compaction left alone, new ones for summaries,
notes and cleared outputs. The agent's ``instructions`` are stored as the session's system
message (again where they change) and counted in the budget; they go out as the request's
instructions. Each conversation (``conversation_id``: a run continues the one of its
``message_history``; a history whose first message names none is known by that message)
is a session of its own; ``capability.session`` is the first one's,
``capability.sessions`` all of them: layers, rollback and records. The history tools come
as the capability's toolset, so the model can read back what was put away. Needs
``pip install 'openprogram[pydantic-ai]'``.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    BaseToolReturnPart,
    ImageUrl,
    InstructionPart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestContext, ModelRequestParameters
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset

from context import same_prefix
from graph import ChatMessage, ToolCall, ToolSchema
from openprogram._runtime._session import Session
from openprogram.integrations._history import history_functions
from openprogram.integrations._mirror import Entry, Mirror, Paired
from openprogram.integrations._pydantic_kept import KeptMessages, snapshot, state
from openprogram.integrations._threads import Conversations

__all__ = ["OpenProgramCapability", "from_messages", "to_entries"]

NAME = "pydantic_ai"
CM = "context_management"
CM_BETA = {"anthropic-beta": "context-management-2025-06-27"}


@dataclass
class OpenProgramCapability(AbstractCapability[Any]):
    """Stores a Pydantic AI agent's messages in ``session`` and sends each model request
    the session's compacted render of them; offers the history tools unless
    ``history_tools=False``."""

    session: Session
    history_tools: bool = True
    anchor_usage: bool | None = None
    """Correct token estimates with the input tokens the provider reports; ``None``: yes,
    except for Pydantic AI's ``FunctionModel`` and ``TestModel``, which only guess them."""
    mirror: Mirror = field(init=False, repr=False)
    """The mirror of the first conversation (the given session's)."""
    conversations: Conversations = field(init=False, repr=False)
    _toolset: AbstractToolset[Any] | None = field(init=False, repr=False, default=None)
    _kept: KeptMessages = field(init=False, repr=False)
    _outgoing: dict[str | None, _Outgoing] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.conversations = Conversations(self.session, NAME)
        self.mirror = self.conversations.mirror
        self._kept = KeptMessages(_message_entries)
        self.get_toolset()  # built with the agent: not in its first request

    @property
    def sessions(self) -> dict[str, Session]:
        """The session of each conversation seen so far."""
        return self.conversations.sessions

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a live session: not spec-serializable

    def get_toolset(self) -> AbstractToolset[Any] | None:
        if not self.history_tools:
            return None
        if self._toolset is None:  # built once: its schemas cost ~10 ms
            self._toolset = FunctionToolset(history_functions(self.session))
        return self._toolset

    async def wrap_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        handler: Any,
    ) -> ModelResponse:
        messages = request_context.messages
        entries = self._kept.entries(messages)
        conversation = _conversation(ctx, messages, entries)
        mirror = self.conversations.mirror_for(conversation)
        parameters = request_context.model_request_parameters
        tools = _schemas(request_context.model, parameters)
        system = _instructions(parameters.instruction_parts, messages)
        paired = await asyncio.to_thread(
            partial(mirror.render, conversation=conversation, model=_model(request_context)),
            entries,
            tools,
            system,
        )
        instructions = "\n\n".join(
            _text(p.message.get("content"))
            for p in paired
            if p.entry is None and p.message.get("role") == "system"
        )
        rest = [p for p in paired if p.entry is not None or p.message.get("role") != "system"]
        outgoing = self._outgoing.setdefault(conversation, _Outgoing())
        request_context.messages = outgoing.messages(rest)
        if instructions != (system or ""):
            parts = [InstructionPart(instructions)] if instructions else []
            request_context.model_request_parameters = dataclasses.replace(
                parameters, instruction_parts=parts
            )
        last = mirror.last
        edits = last.context_management if last else None
        if edits:  # cache edits (Anthropic): the messages stay, the provider clears
            settings: dict[str, Any] = dict(request_context.model_settings or {})
            settings["extra_body"] = {**dict(settings.get("extra_body") or {}), **{CM: edits}}
            settings["extra_headers"] = {**settings.get("extra_headers", {}), **CM_BETA}
            request_context.model_settings = cast(ModelSettings, settings)
        response: ModelResponse = await handler(request_context)
        answered = [*entries, *_message_entries(response)]
        await asyncio.to_thread(mirror.sync, answered, system)
        anchor = self.anchor_usage
        if anchor is None:
            anchor = not isinstance(request_context.model, FunctionModel | TestModel)
        if anchor and response.usage.input_tokens > 0 and last is not None:
            mirror.session.engine.anchor_usage(response.usage.input_tokens, estimated=last.tokens)
        return response


def _conversation(
    ctx: RunContext[Any], messages: Sequence[ModelMessage], entries: Sequence[Entry]
) -> str | None:
    """The conversation a request belongs to: the run's (``ctx.conversation_id``, which
    Pydantic AI takes from the history's messages), except for a history whose first
    message names none (built by hand, or stored without ids): Pydantic AI then makes up a
    new id for every run, so the conversation is named by the history's first message
    itself, the same in every run and process that continues it."""
    first = messages[0] if messages else None
    if first is None or first.conversation_id is not None or first.run_id == ctx.run_id:
        return ctx.conversation_id
    opening = [e.digest for e in entries if _source(e) is first]
    text = "\n".join(opening)
    return "history-" + hashlib.sha256(text.encode()).hexdigest()[:32]


def _source(entry: Entry) -> Any:
    """The framework message an entry was made from."""
    return entry.original[0] if isinstance(entry.original, tuple) else entry.original


def _model(request: ModelRequestContext) -> str | None:
    """The name of the model a request goes to (``gpt-4o``), recorded in the session."""
    name = getattr(request.model, "model_name", None)
    return name if isinstance(name, str) and name else None


def _instructions(
    parts: Sequence[InstructionPart] | None, messages: Sequence[ModelMessage]
) -> str | None:
    """The instructions the request goes out with: its parameters' parts (the agent flow),
    or else the newest request's ``instructions``."""
    if parts is not None:
        return InstructionPart.join(parts)
    for message in reversed(messages):
        if isinstance(message, ModelRequest) and message.instructions is not None:
            return message.instructions
    return None


# -- Pydantic AI messages -> chat messages ------------------------------------------------
def to_entries(messages: Sequence[ModelMessage]) -> list[Entry]:
    """Each request part and each response as an :class:`Entry` (``original``: the part's
    ``(request, index)``, or the response)."""
    return [entry for message in messages for entry in _message_entries(message)]


def _message_entries(message: ModelMessage) -> list[Entry]:
    if isinstance(message, ModelResponse):
        return [_response_entry(message)]
    entries: list[Entry] = []
    for index, part in enumerate(message.parts):
        chat = _part_message(part)
        kind = getattr(part, "part_kind", type(part).__name__)
        meta = {NAME: {"part_kind": kind, **_ids(message)}}
        entries.append(Entry(chat, (message, index), meta))
    return entries


def _ids(message: ModelMessage) -> dict[str, str]:
    ids = {"run_id": message.run_id, "conversation_id": message.conversation_id}
    return {key: value for key, value in ids.items() if value is not None}


def _part_message(part: ModelRequestPart) -> ChatMessage:
    if isinstance(part, SystemPromptPart):
        return {"role": "system", "content": part.content}
    if isinstance(part, UserPromptPart):
        return {"role": "user", "content": _user_content(part.content)}
    if isinstance(part, BaseToolReturnPart):
        message: ChatMessage = {"role": "tool", "tool_call_id": part.tool_call_id}
        message["content"] = part.model_response_str()
        if getattr(part, "outcome", "success") != "success":
            message["is_error"] = True
        return message
    if isinstance(part, RetryPromptPart) and part.tool_name is not None:
        text = part.model_response()
        return {
            "role": "tool",
            "tool_call_id": part.tool_call_id,
            "content": text,
            "is_error": True,
        }
    describe = getattr(part, "model_response", None)
    text = describe() if callable(describe) else str(getattr(part, "content", part))
    return {"role": "user", "content": text}


def _user_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for item in content:
        if isinstance(item, str):
            parts.append({"type": "text", "text": item})
        elif isinstance(item, ImageUrl):
            parts.append({"type": "image_url", "image_url": {"url": item.url}})
        else:
            parts.append({"type": "text", "text": f"[{type(item).__name__}]"})
    return parts


def _response_entry(response: ModelResponse) -> Entry:
    texts = [p.content for p in response.parts if isinstance(p, TextPart)]
    thinking = [p.content for p in response.parts if isinstance(p, ThinkingPart) and p.content]
    calls: list[ToolCall] = [
        {
            "id": p.tool_call_id,
            "type": "function",
            "function": {"name": p.tool_name, "arguments": p.args_as_json_str()},
        }
        for p in response.parts
        if isinstance(p, ToolCallPart)
    ]
    message: ChatMessage = {"role": "assistant", "content": "\n\n".join(texts) or None}
    if thinking:
        message["thinking"] = "\n\n".join(thinking)
    if calls:
        message["tool_calls"] = calls
    usage = response.usage
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    meta: dict[str, Any] = {
        NAME: {
            "provider_response_id": response.provider_response_id,
            "finish_reason": response.finish_reason,
            **_ids(response),
        },
        "model": response.model_name,
        "usage": {
            "input": max(0, usage.input_tokens - cached),
            "cache_read": usage.cache_read_tokens,
            "cache_creation": usage.cache_write_tokens,
            "output": usage.output_tokens,
        },
    }
    return Entry(message, response, meta)


# -- rendered chat messages -> Pydantic AI messages ---------------------------------------
def from_messages(paired: Sequence[Paired]) -> list[ModelMessage]:
    """The messages a request goes out with: the originals for what compaction left alone
    (a whole original request when all its parts are there in order), new ones for the rest."""
    return _convert(paired, 0)[0]


class _Outgoing:
    """:func:`from_messages` of one conversation's requests, the last request's messages
    reused for the pairs it shared with this one (the same objects, found in C), so a
    request converts only what it adds. Pydantic AI writes on the last message it sends
    (its run's ids, the instructions it records), so that one is never kept; a message made
    here (not the framework's own) is kept only while it holds what it was made with (a
    hook may have changed it in place)."""

    def __init__(self) -> None:
        self._last: tuple[list[Paired], list[ModelMessage], list[int], list[_Made]] = (
            [],
            [],
            [],
            [],
        )

    def messages(self, paired: list[Paired]) -> list[ModelMessage]:
        last_paired, last_messages, last_ends, last_made = self._last
        shared = same_prefix(paired, last_paired)
        # a message is kept when the pair after its last one is shared too (so it ends there
        # this time as well): never the last request's last message, which Pydantic AI wrote
        # on, and never this request's last, which is made here
        keep = bisect.bisect_right(last_ends, shared - 1)
        made = []
        for at, copy in last_made:
            if at >= keep:
                break
            if copy != state(last_messages[at]):
                keep = at
                break
            made.append((at, copy))
        start = last_ends[keep - 1] if keep else 0
        new, ends, fresh = _convert(paired, start)
        made += [(keep + at, snapshot(new[at])) for at in fresh]
        messages = [*last_messages[:keep], *new]
        self._last = (paired, messages, [*last_ends[:keep], *ends], made)
        return list(messages)


_Made = tuple[int, list[Any]]
"""A message made here (its index) and a copy of its fields when it was made."""


def _convert(
    paired: Sequence[Paired], start: int
) -> tuple[list[ModelMessage], list[int], list[int]]:
    """:func:`from_messages` of ``paired[start:]`` (``start``: where a message began), for
    each message the index in ``paired`` after its last pair, and the indexes of the
    messages made here (not the framework's own)."""
    messages: list[ModelMessage] = []
    ends: list[int] = []
    made: list[int] = []
    parts: list[ModelRequestPart] = []
    sources: list[tuple[ModelRequest, int] | None] = []
    names: dict[str, str] = {}
    named = start == 0

    def flush(end: int) -> None:
        if not parts:
            return
        first = sources[0]
        whole = (
            first is not None
            and all(s is not None and s[0] is first[0] for s in sources)
            and [s[1] for s in sources if s is not None] == list(range(len(first[0].parts)))
        )
        if whole and first is not None:
            messages.append(first[0])
        else:
            made.append(len(messages))
            messages.append(ModelRequest(parts=parts[:]))
        ends.append(end)
        parts.clear()
        sources.clear()

    for index in range(start, len(paired)):
        item = paired[index]
        message, entry = item.message, item.entry
        if message.get("role") == "assistant":
            flush(index)
            for call in message.get("tool_calls") or ():
                names[call["id"]] = call["function"]["name"]
            original = entry.original if entry is not None else None
            if not isinstance(original, ModelResponse):
                made.append(len(messages))
                original = _response(message)
            messages.append(original)
            ends.append(index + 1)
            continue
        source = entry.original if entry is not None else None
        if isinstance(source, tuple):
            parts.append(source[0].parts[source[1]])
            sources.append(source)
        else:
            if not named and message.get("role") == "tool":
                names = {**_call_names(paired[:start]), **names}
                named = True
            parts.append(_request_part(message, names))
            sources.append(None)
    flush(len(paired))
    return messages, ends, made


def _call_names(paired: Sequence[Paired]) -> dict[str, str]:
    """The tool name of each call id the assistant messages of ``paired`` make."""
    return {
        call["id"]: call["function"]["name"]
        for item in paired
        if item.message.get("role") == "assistant"
        for call in item.message.get("tool_calls") or ()
    }


def _request_part(message: ChatMessage, names: dict[str, str]) -> ModelRequestPart:
    content = message.get("content")
    text = content if isinstance(content, str) else _text(content)
    role = message.get("role")
    if role == "system":
        return SystemPromptPart(text)
    if role == "tool":
        call_id = str(message.get("tool_call_id"))
        return ToolReturnPart(names.get(call_id, "unknown"), text, call_id)
    return UserPromptPart(text)


def _response(message: ChatMessage) -> ModelResponse:
    parts: list[ModelResponsePart] = []
    if message.get("thinking"):
        parts.append(ThinkingPart(str(message["thinking"])))
    content = message.get("content")
    text = content if isinstance(content, str) else _text(content)
    if text:
        parts.append(TextPart(text))
    for call in message.get("tool_calls") or ():
        function = call["function"]
        parts.append(ToolCallPart(function["name"], function.get("arguments"), call["id"]))
    return ModelResponse(parts=parts)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not content:
        return ""
    return "\n".join(str(p.get("text", "")) for p in content if p.get("type") == "text")


def _schemas(model: Model, parameters: ModelRequestParameters) -> list[ToolSchema]:
    """The tools as the model sends them, counted in the budget as sent: the model's own
    ``customize_request_parameters`` first (its schema transformer decides ``strict`` and
    rewrites the schemas), then ``OpenAIChatModel``'s mapping (an empty description kept,
    ``strict`` when set and the profile allows it); output tools too."""
    with contextlib.suppress(Exception):  # a model that cannot: the tools as given
        parameters = model.customize_request_parameters(parameters)
    strict = model.profile.get("openai_supports_strict_tool_definition", True) is not False
    tools = [*parameters.function_tools, *parameters.output_tools]
    return [_schema(tool, strict) for tool in tools]


def _schema(tool: ToolDefinition, strict: bool = True) -> ToolSchema:
    function: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description or "",
        "parameters": tool.parameters_json_schema,
    }
    if tool.strict and strict:
        function["strict"] = tool.strict
    schema: ToolSchema = json.loads(json.dumps({"type": "function", "function": function}))
    return schema
