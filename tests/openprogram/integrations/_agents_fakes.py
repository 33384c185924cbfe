"""A scripted Agents SDK model for the adapter tests: the SDK ships no fake model of its own,
and each test would otherwise build the same response by hand. Import it after
``pytest.importorskip("agents")``."""

from __future__ import annotations

from typing import Any

from agents import Model, ModelResponse
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText


def say(text: str) -> ResponseOutputMessage:
    """An assistant message item holding ``text``, as a Responses model returns it."""
    part = ResponseOutputText(type="output_text", text=text, annotations=[])
    return ResponseOutputMessage(
        id="msg", type="message", role="assistant", status="completed", content=[part]
    )


class Answering(Model):
    """A model that answers every call with ``text``. With ``record``, each call's input is
    kept in ``received``; with ``model``, it names itself as the SDK's OpenAI models do."""

    def __init__(self, text: str = "ok", *, model: str | None = None, record: bool = True) -> None:
        self.text, self.record = text, record
        self.received: list[list[Any]] = []
        if model is not None:
            self.model = model

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        if self.record:
            self.received.append(list(kwargs["input"]))
        return ModelResponse(output=[say(self.text)], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError
