"""The provider wire shapes OpenProgram writes besides the chat message (``graph.ChatMessage``):
Anthropic Messages content blocks and messages, OpenAI Responses input items.

TypedDicts: types for the checker only, plain dicts at run time. What a client or a trace
sends is JSON read where it is used (a block of a kind the proxy does not read, an image
say, is passed on as it came); these name the kinds the adapters read and build.
"""

from collections.abc import Mapping
from typing import Literal, NotRequired, TypeAlias, TypedDict

__all__ = [
    "AnthropicBlock",
    "AnthropicMessage",
    "CacheControl",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "MessageItem",
    "ResponsesItem",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
]


class CacheControl(TypedDict):
    """An Anthropic prompt-cache breakpoint (``{"type": "ephemeral"}``, a ``ttl`` maybe)."""

    type: str
    ttl: NotRequired[str]


class TextBlock(TypedDict):
    """Text, in a message or a system prompt."""

    type: Literal["text"]
    text: str
    cache_control: NotRequired[CacheControl]


class ToolUseBlock(TypedDict):
    """An assistant's tool call: its ``input`` is the arguments as a JSON object."""

    type: Literal["tool_use"]
    id: str
    name: str
    input: Mapping[str, object]
    cache_control: NotRequired[CacheControl]


class ToolResultBlock(TypedDict):
    """A tool's result, in the user message after the call (``tool_use_id`` names it)."""

    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[TextBlock]
    is_error: NotRequired[bool]
    cache_control: NotRequired[CacheControl]


class ThinkingBlock(TypedDict):
    """Extended thinking, sent back with its ``signature`` exactly as it came."""

    type: Literal["thinking"]
    thinking: str
    signature: str
    cache_control: NotRequired[CacheControl]


AnthropicBlock: TypeAlias = TextBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock


class AnthropicMessage(TypedDict):
    """One entry of an Anthropic request's ``messages`` (the system prompt goes apart)."""

    role: str
    content: str | list[AnthropicBlock]


class MessageItem(TypedDict):
    """A Responses input message (``type`` ``message`` when given)."""

    role: str
    content: str
    type: NotRequired[Literal["message"]]


class FunctionCallItem(TypedDict):
    """A model's function call among a Responses request's ``input``."""

    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    id: NotRequired[str]


class FunctionCallOutputItem(TypedDict):
    """A function call's output, answering ``call_id``."""

    type: Literal["function_call_output"]
    call_id: str
    output: str


ResponsesItem: TypeAlias = MessageItem | FunctionCallItem | FunctionCallOutputItem
