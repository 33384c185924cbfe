"""A LangChain chat model that sends chat-completions requests over HTTP, its body built by
``langchain_core``'s own OpenAI converters (``langchain-openai`` is not installed here):
what ``create_agent`` sends a provider, on the wire."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from openai import OpenAI
from pydantic import Field


class WireChatModel(BaseChatModel):
    base_url: str
    model: str
    tools: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "wire-openai"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> WireChatModel:  # type: ignore[override]
        return self.model_copy(update={"tools": [convert_to_openai_tool(t) for t in tools]})

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": convert_to_openai_messages(messages),
        }
        if self.tools:
            body["tools"] = self.tools
        with OpenAI(base_url=self.base_url, api_key="k", max_retries=0) as client:
            reply = client.chat.completions.create(**body)
        choice = reply.choices[0].message
        calls = [
            {"name": c.function.name, "args": json.loads(c.function.arguments), "id": c.id}
            for c in choice.tool_calls or ()
            if c.type == "function"
        ]
        usage = reply.usage
        prompt = usage.prompt_tokens if usage else 0
        completion = usage.completion_tokens if usage else 0
        message = AIMessage(
            content=choice.content or "",
            tool_calls=calls,
            usage_metadata={
                "input_tokens": prompt,
                "output_tokens": completion,
                "total_tokens": prompt + completion,
            },
            response_metadata={"model_name": reply.model, "id": reply.id},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])
