"""The OpenAI chat message a graph renders (``to_openai``) and every layer above passes on.

TypedDicts: types for the checker only, plain dicts at run time (nothing is validated or
copied on the hot path; ``graph._messages`` validates what comes in from outside).
"""

from collections.abc import Mapping, Sequence
from typing import Literal, NotRequired, TypeAlias, TypedDict

from ._nodes import Content

ChatRole: TypeAlias = Literal["system", "user", "assistant", "tool"]

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


class ProviderFields(TypedDict):
    """A message's ``provider_specific_fields`` (litellm's name): what a provider returned
    beyond the chat shape; the engine reads its compaction blocks, passes the rest on."""

    compaction_blocks: NotRequired[Sequence[JSONObject]]


class ChatMessage(TypedDict):
    """One OpenAI chat message, any role (``system``, ``user``, ``assistant``, ``tool``).

    One shape for all roles rather than a union: the render, the cascade and the adapters
    read ``tool_calls`` or ``tool_call_id`` off any message, as providers do.
    """

    role: ChatRole
    content: NotRequired[Content]
    name: NotRequired[str]
    tool_calls: NotRequired[list[ToolCall]]
    """An assistant's requested calls, answered by ``tool`` messages in order."""
    tool_call_id: NotRequired[str]
    """The call a ``tool`` message answers."""
    thinking: NotRequired[str]
    reasoning_content: NotRequired[str]
    is_error: NotRequired[bool]
    """A ``tool`` message whose result is an error."""
    provider_specific_fields: NotRequired[ProviderFields]
    """What a provider returned beyond the chat shape (compaction blocks, signatures)."""


class FunctionSchema(TypedDict):
    """A tool as the model sees it: its name, what it does and its JSON Schema."""

    name: str
    description: NotRequired[str]
    parameters: NotRequired[JSONObject]
    strict: NotRequired[bool]


class ToolSchema(TypedDict):
    """One entry of a request's ``tools``."""

    type: str
    function: FunctionSchema
