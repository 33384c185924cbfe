"""A scripted LLM provider: a real HTTP server on 127.0.0.1 speaking two wire formats.

* ``POST /v1/chat/completions`` -- OpenAI chat completions. Point litellm at it with
  ``model="openai/<anything>", api_base=fake.base_url`` (``http://127.0.0.1:PORT/v1``).
* ``POST /v1/messages`` -- Anthropic Messages. litellm appends ``/v1/messages`` to the
  anthropic ``api_base`` unless the base already ends with it, so pass
  ``api_base=fake.anthropic_base_url`` (``http://127.0.0.1:PORT``, no ``/v1``); passing
  ``.../v1`` would make litellm call ``/v1/v1/messages``.

Responses are scripted in order with ``reply``, ``reply_tool_call``, ``reply_tool_calls``
(several calls in one reply, for parallel tool calls), ``overflow`` and ``status``; each
request consumes one, and an empty queue answers ``"ok"``. ``prompt_tokens_of``, when set,
is called with each request's body and gives the input tokens the reply reports (what a
provider counted), in place of the scripted figure. Scripted
replies are rendered in whichever format the request's path asks for. Note that the
OpenAI SDK retries 408/409/429/5xx responses, and each retry consumes a queued entry.
Every request is recorded in ``requests``.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass(frozen=True)
class _Text:
    text: str
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class _ToolCall:
    name: str
    arguments: str
    prompt_tokens: int
    completion_tokens: int
    call_id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:16]}")


@dataclass(frozen=True)
class _ToolCalls:
    calls: tuple[_ToolCall, ...]
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class _Overflow:
    pass


@dataclass(frozen=True)
class _Compaction:
    """An Anthropic reply whose content starts with a server-side ``compaction`` block."""

    summary: str
    text: str
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class _Status:
    code: int
    body: Any


_Script = _Text | _ToolCall | _ToolCalls | _Overflow | _Status | _Compaction


def _calls_of(item: _ToolCall | _ToolCalls) -> tuple[_ToolCall, ...]:
    return item.calls if isinstance(item, _ToolCalls) else (item,)


def _openai_usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _anthropic_usage(prompt: int, completion: int) -> dict[str, int]:
    return {"input_tokens": prompt, "output_tokens": completion}


def _model_of(body: Any) -> str:
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        return str(body["model"])
    return "fake-model"


def _openai_response(item: _Script, body: Any) -> tuple[int, Any]:
    if isinstance(item, _Status):
        return item.code, item.body
    if isinstance(item, _Overflow):
        return 400, {
            "error": {
                "message": (
                    "This model's maximum context length is 128000 tokens. However, your "
                    "messages resulted in 131072 tokens. Please reduce the length of the "
                    "messages."
                ),
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
    message: dict[str, Any]
    if isinstance(item, _Compaction):
        item = _Text(item.text, item.prompt_tokens, item.completion_tokens)
    if isinstance(item, _Text):
        message = {"role": "assistant", "content": item.text}
        finish = "stop"
    else:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in _calls_of(item)
            ],
        }
        finish = "tool_calls"
    return 200, {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": _model_of(body),
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": _openai_usage(item.prompt_tokens, item.completion_tokens),
    }


def _anthropic_response(item: _Script, body: Any) -> tuple[int, Any]:
    if isinstance(item, _Status):
        return item.code, item.body
    if isinstance(item, _Overflow):
        return 400, {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 210000 tokens > 200000 maximum",
            },
        }
    content: list[dict[str, Any]]
    if isinstance(item, _Compaction):
        content = [
            {"type": "compaction", "content": item.summary},
            {"type": "text", "text": item.text},
        ]
        stop = "end_turn"
    elif isinstance(item, _Text):
        content = [{"type": "text", "text": item.text}]
        stop = "end_turn"
    else:
        content = [
            {
                "type": "tool_use",
                "id": call.call_id.replace("call_", "toolu_"),
                "name": call.name,
                "input": json.loads(call.arguments),
            }
            for call in _calls_of(item)
        ]
        stop = "tool_use"
    return 200, {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": _model_of(body),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": _anthropic_usage(item.prompt_tokens, item.completion_tokens),
    }


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        path = self.path.split("?", 1)[0]
        provider = self.server.provider
        provider._record(
            RecordedRequest(path, {k.lower(): v for k, v in self.headers.items()}, body)
        )
        if path == OPENAI_PATH:
            code, payload = _openai_response(provider._next(), body)
        elif path == ANTHROPIC_PATH:
            code, payload = _anthropic_response(provider._next(), body)
        else:
            code, payload = 404, {"error": {"message": f"no route {path}", "type": "not_found"}}
        counted = provider.prompt_tokens_of
        if counted is not None and isinstance(payload, dict) and "usage" in payload:
            key = "prompt_tokens" if path == OPENAI_PATH else "input_tokens"
            payload["usage"][key] = counted(body)
            if "total_tokens" in payload["usage"]:
                usage = payload["usage"]
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    provider: FakeProvider


class FakeProvider:
    """Scripted OpenAI/Anthropic-compatible endpoint; see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[_Script] = deque()
        self.requests: list[RecordedRequest] = []
        self.prompt_tokens_of: Callable[[Any], int] | None = None
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.provider = self
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-provider-{self.port}",
            daemon=True,
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        """OpenAI-compatible base (``.../v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """Anthropic base for litellm (no ``/v1``; litellm appends ``/v1/messages``)."""
        return f"http://127.0.0.1:{self.port}"

    def reply(self, text: str, *, prompt_tokens: int = 10, completion_tokens: int = 1) -> None:
        self._push(_Text(text, prompt_tokens, completion_tokens))

    def reply_tool_call(
        self,
        name: str,
        arguments_json: str,
        *,
        prompt_tokens: int = 10,
        completion_tokens: int = 1,
    ) -> None:
        json.loads(arguments_json)
        self._push(_ToolCall(name, arguments_json, prompt_tokens, completion_tokens))

    def reply_tool_calls(
        self,
        calls: list[tuple[str, str]],
        *,
        prompt_tokens: int = 10,
        completion_tokens: int = 1,
    ) -> None:
        """Queue one reply with several tool calls, each ``(name, arguments_json)``."""
        parsed = []
        for name, arguments_json in calls:
            json.loads(arguments_json)
            parsed.append(_ToolCall(name, arguments_json, 0, 0))
        self._push(_ToolCalls(tuple(parsed), prompt_tokens, completion_tokens))

    def reply_compaction(
        self, summary: str, text: str, *, prompt_tokens: int = 10, completion_tokens: int = 1
    ) -> None:
        """Queue an Anthropic reply that compacted the conversation server-side: a
        ``compaction`` block (``summary``) before the text (OpenAI path: the text only)."""
        self._push(_Compaction(summary, text, prompt_tokens, completion_tokens))

    def overflow(self) -> None:
        """Queue a context-window error (litellm raises ``ContextWindowExceededError``)."""
        self._push(_Overflow())

    def status(self, code: int, body: Any = None) -> None:
        """Queue an arbitrary response; ``body`` is JSON-encoded unless it is ``bytes``."""
        self._push(
            _Status(code, {"error": {"message": f"status {code}"}} if body is None else body)
        )

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _push(self, item: _Script) -> None:
        with self._lock:
            self._queue.append(item)

    def _next(self) -> _Script:
        with self._lock:
            return self._queue.popleft() if self._queue else _Text("ok", 10, 1)

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)
