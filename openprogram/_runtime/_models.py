"""Models the LLM loop talks to: one small protocol, litellm behind it for real providers.

A model takes provider-ready messages and tool schemas and returns one assistant message
with its usage. :class:`LiteLLMModel` reaches any provider through litellm (imported on the
first call, never at import time); ``openprogram.testing`` has fakes with the same shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec

from context import import_litellm
from graph import ChatMessage, ToolSchema


class Usage(msgspec.Struct, frozen=True):
    """What one call used: input tokens (``cached`` of them read from the prompt cache,
    ``cache_written`` written to it), output tokens and, when known, the cost in USD."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_written: int = 0
    cost: float | None = None

    @property
    def prompt_total(self) -> int:
        """Every input token the provider counted (what anchors our estimates)."""
        return self.input_tokens


class ModelResponse(msgspec.Struct, frozen=True):
    """One assistant message (OpenAI format, tool calls included) and its usage."""

    message: ChatMessage
    usage: Usage = Usage()
    model: str = ""
    provider_items: list[Mapping[str, object]] = msgspec.field(default_factory=list)
    """Provider-side compaction blocks or items returned with the message, if any."""
    id: str = ""
    """The provider's id of the response, when it gave one."""
    finish_reason: str | None = None
    """Why the model stopped (``stop``, ``tool_calls``, ``length``…), when known."""


@runtime_checkable
class Model(Protocol):
    """Anything that completes a chat: ``name`` and ``complete(...)`` (``acomplete`` for
    async code; :class:`LiteLLMModel` and the fakes have both)."""

    name: str

    def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSchema] = (),
        **options: Any,
    ) -> ModelResponse: ...

    async def acomplete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSchema] = (),
        **options: Any,
    ) -> ModelResponse: ...


def _litellm() -> Any:
    return import_litellm()


class LiteLLMModel:
    """Any litellm model by name (``openai/gpt-4o-mini``, ``anthropic/claude-sonnet-4-5``…).

    Keyword arguments (``api_base``, ``api_key``, ``temperature``, ``num_retries``…) go to
    every ``litellm.completion`` call.

    >>> LiteLLMModel("openai/gpt-4o-mini", temperature=0).name
    'openai/gpt-4o-mini'
    """

    def __init__(self, name: str, **kwargs: Any) -> None:
        self.name = name
        self.kwargs = kwargs

    def _arguments(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSchema], options: Any
    ) -> dict[str, Any]:
        arguments: dict[str, Any] = {"model": self.name, "messages": list(messages)}
        if tools:
            arguments["tools"] = list(tools)
        arguments.update(self.kwargs)
        arguments.update({k: v for k, v in options.items() if v is not None})
        return arguments

    def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSchema] = (),
        **options: Any,
    ) -> ModelResponse:
        litellm = _litellm()
        response = litellm.completion(**self._arguments(messages, tools, options))
        return from_litellm(response, self.name)

    async def acomplete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSchema] = (),
        **options: Any,
    ) -> ModelResponse:
        litellm = _litellm()
        response = await litellm.acompletion(**self._arguments(messages, tools, options))
        return from_litellm(response, self.name)


def from_litellm(response: Any, name: str) -> ModelResponse:
    """A litellm ``ModelResponse`` as ours: the message, usage, cost and provider items."""
    choice = response.choices[0]
    raw = choice.message
    message: ChatMessage = {"role": "assistant", "content": raw.content}
    calls = getattr(raw, "tool_calls", None) or []
    if calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.function.name,
                    "arguments": call.function.arguments or "{}",
                },
            }
            for call in calls
        ]
    thinking = getattr(raw, "reasoning_content", None)
    if thinking:
        message["thinking"] = thinking
    usage = getattr(response, "usage", None)
    prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
    details = getattr(usage, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
    cached = cached or int(getattr(usage, "cache_read_input_tokens", 0) or 0)
    written = int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
    cost = None
    try:
        cost = float(_litellm().completion_cost(completion_response=response))
    except Exception:  # unknown model or price: cost stays unknown
        cost = None
    provider: list[Mapping[str, object]] = []
    fields = getattr(raw, "provider_specific_fields", None) or {}
    if isinstance(fields, dict):
        for key in ("compaction", "compaction_blocks"):
            value = fields.get(key)
            if isinstance(value, list):
                provider.extend(v for v in value if isinstance(v, dict))
            elif isinstance(value, dict):
                provider.append(value)
    return ModelResponse(
        message=message,
        usage=Usage(
            input_tokens=prompt,
            output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cached_tokens=cached,
            cache_written=written,
            cost=cost,
        ),
        model=str(getattr(response, "model", "") or name),
        provider_items=provider,
        id=str(getattr(response, "id", "") or ""),
        finish_reason=getattr(choice, "finish_reason", None) or None,
    )


def resolve_model(model: Model | str | None) -> Model | None:
    """A model object from a name (litellm) or a model (kept as is)."""
    if model is None or not isinstance(model, str):
        return model
    return LiteLLMModel(model)
