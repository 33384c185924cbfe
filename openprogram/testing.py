"""Fake models for testing agents: no provider, no network, every request recorded.

``TestModel`` replays a script; ``FunctionModel`` asks a function of yours, which sees
exactly the messages and tools a provider would receive. Both plug into a program without
touching its call sites::

    from openprogram.testing import TestModel, override

    with override(model=TestModel(["hello"])):
        assert session.llm("hi") == "hello"

Script entries: a string (a text reply), a dict (an assistant message, with ``tool_calls``
if you like), a :class:`~openprogram.ModelResponse`, an exception instance (raised, e.g. a
``litellm.ContextWindowExceededError``), or :func:`tool_call` results.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from graph import ChatMessage, ToolCall, ToolSchema
from openprogram._runtime._current import MODEL
from openprogram._runtime._models import Model, ModelResponse, Usage

__all__ = ["FunctionModel", "ModelRequest", "TestModel", "override", "tool_call"]

_IDS = itertools.count(1)


def tool_call(
    name: str, arguments: Mapping[str, object] | str | None = None, *, id: str | None = None
) -> ToolCall:
    """One entry of an assistant message's ``tool_calls``.

    >>> tool_call("search", {"query": "cache"}, id="c1")["function"]
    {'name': 'search', 'arguments': '{"query": "cache"}'}
    """
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    call_id = id or f"call_{next(_IDS)}"
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


@dataclass(frozen=True)
class ModelRequest:
    """What a fake model was asked: the messages and tools a provider would have received."""

    messages: list[ChatMessage]
    tools: list[ToolSchema]
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def tool_names(self) -> list[str]:
        return [tool["function"]["name"] for tool in self.tools]

    @property
    def last(self) -> Mapping[str, object]:
        """The newest message (empty when there was none)."""
        return self.messages[-1] if self.messages else {}


def _estimate(messages: Sequence[ChatMessage]) -> int:
    return sum(len(json.dumps(m, default=str)) for m in messages) // 4


def _response(reply: Any, request: ModelRequest, name: str, number: int) -> ModelResponse:
    if isinstance(reply, BaseException):
        raise reply
    if isinstance(reply, ModelResponse):
        return reply
    if isinstance(reply, str):
        message: ChatMessage = {"role": "assistant", "content": reply}
    elif isinstance(reply, dict):
        message = cast("ChatMessage", {"role": "assistant", "content": None, **reply})
    else:
        raise TypeError(f"a fake model's reply must be str, dict or ModelResponse, not {reply!r}")
    usage = Usage(input_tokens=_estimate(request.messages), output_tokens=_estimate([message]))
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return ModelResponse(
        message=message, usage=usage, model=name, id=f"{name}-{number}", finish_reason=finish
    )


class _Fake:
    name = "test"
    provider = "openprogram.testing"
    """``gen_ai.provider.name`` on this model's spans."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    def _reply(self, request: ModelRequest) -> Any:
        raise NotImplementedError

    def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSchema] = (),
        **options: Any,
    ) -> ModelResponse:
        request = ModelRequest(
            json.loads(json.dumps(list(messages), default=str)), list(tools), options
        )
        self.requests.append(request)
        return _response(self._reply(request), request, self.name, len(self.requests))

    async def acomplete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSchema] = (),
        **options: Any,
    ) -> ModelResponse:
        return self.complete(messages, tools, **options)


class TestModel(_Fake):
    """Replies from a script, in order; once it runs out, ``default`` (or an error).

    >>> model = TestModel(["first", {"content": "second"}])
    >>> model.complete([{"role": "user", "content": "hi"}]).message["content"]
    'first'
    >>> model.requests[0].messages
    [{'role': 'user', 'content': 'hi'}]
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self, script: Sequence[Any] = (), *, default: Any = None, name: str = "test"
    ) -> None:
        super().__init__()
        self.script = list(script)
        self.default = default
        self.name = name

    def _reply(self, request: ModelRequest) -> Any:
        if self.script:
            return self.script.pop(0)
        if self.default is None:
            raise AssertionError(f"TestModel ran out of replies after {len(self.requests) - 1}")
        return self.default


class FunctionModel(_Fake):
    """Replies with ``fn(request)``: the function sees what a provider would.

    >>> model = FunctionModel(lambda request: f"{len(request.messages)} message(s)")
    >>> model.complete([{"role": "user", "content": "hi"}]).message["content"]
    '1 message(s)'
    """

    def __init__(self, fn: Callable[[ModelRequest], Any], *, name: str = "function") -> None:
        super().__init__()
        self.fn = fn
        self.name = name

    def _reply(self, request: ModelRequest) -> Any:
        return self.fn(request)


@contextmanager
def override(*, model: Model) -> Iterator[Model]:
    """Every LLM call in the block (this thread or task and those it starts) uses ``model``."""
    token = MODEL.set(model)
    try:
        yield model
    finally:
        MODEL.reset(token)
