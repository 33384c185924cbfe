"""The OpenAI chat message a graph renders (``to_openai``) and every layer above passes on.

TypedDicts: types for the checker only, plain dicts at run time (nothing is validated or
copied on the hot path; ``graph._messages`` validates what comes in from outside).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NotRequired, TypeAlias, TypedDict

from ._nodes import Content

JSONObject: TypeAlias = Mapping[str, object]
"""Arbitrary JSON the engine passes through without reading its shape: tool arguments,
tool schemas, provider extras."""


class FunctionCall(TypedDict):
    """What an assistant's tool call names: the tool and its JSON arguments as text."""

    name: str
    arguments: str


class ToolCall(TypedDict):
    """One entry of an assistant message's ``tool_calls``."""

    id: str
    type: str
    function: FunctionCall


class ChatMessage(TypedDict):
    """One OpenAI chat message, any role (``system``, ``user``, ``assistant``, ``tool``).

    One shape for all roles rather than a union: the render, the cascade and the adapters
    read ``tool_calls`` or ``tool_call_id`` off any message, as providers do.
    """

    role: str
    content: NotRequired[Content]
    name: NotRequired[str]
    tool_calls: NotRequired[list[ToolCall]]
    """An assistant's requested calls, answered by ``tool`` messages in order."""
    tool_call_id: NotRequired[str]
    """The call a ``tool`` message answers."""
    thinking: NotRequired[str]
    reasoning_content: NotRequired[str]
    provider_specific_fields: NotRequired[JSONObject]
    """What a provider returned beyond the chat shape (compaction blocks, signatures)."""
