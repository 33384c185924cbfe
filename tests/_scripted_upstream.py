"""A scripted provider on 127.0.0.1 speaking Anthropic Messages, OpenAI Chat Completions and
Responses (with ``/v1/responses/compact``), streamed (SSE) and not, with tool calls and
thinking blocks (reasoning items): the proxy's upstream in tests.

``script(protocol, body)`` returns the reply's Anthropic content blocks (``text``,
``tool_use``, ``thinking``); the OpenAI path turns them into a message with ``tool_calls``, Responses into output items.
Every request is recorded (path, headers, body). Usage is reported as a provider would:
input from the body's size, a few cached tokens, so a proxy's record of it can be checked.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

Blocks = list[dict[str, Any]]
Script = Callable[[str, dict[str, Any]], Blocks]
CACHED = 7


@dataclass(frozen=True)
class Seen:
    path: str
    headers: dict[str, str]
    body: Any
    query: str = ""


def text(value: str) -> Blocks:
    return [{"type": "text", "text": value}]


def calls(*pairs: tuple[str, dict[str, Any]]) -> Blocks:
    return [
        {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:20]}", "name": name, "input": args}
        for name, args in pairs
    ]


def _input_tokens(body: Any) -> int:
    return max(1, len(json.dumps(body)) // 4)


def _anthropic_message(blocks: Blocks, body: dict[str, Any]) -> dict[str, Any]:
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-fake"),
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": _input_tokens(body),
            "cache_read_input_tokens": CACHED,
            "cache_creation_input_tokens": 0,
            "output_tokens": 5,
        },
    }


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _anthropic_events(blocks: Blocks, body: dict[str, Any]) -> list[bytes]:
    message = _anthropic_message(blocks, body)
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}
    out = [_sse("message_start", {"type": "message_start", "message": start})]
    for n, block in enumerate(blocks):
        if block["type"] == "text":
            first, deltas = (
                {"type": "text", "text": ""},
                [
                    {"type": "text_delta", "text": block["text"][:3]},
                    {"type": "text_delta", "text": block["text"][3:]},
                ],
            )
        elif block["type"] == "tool_use":
            first = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            raw = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": raw[:2]},
                      {"type": "input_json_delta", "partial_json": raw[2:]}]  # fmt: skip
        else:
            first = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": block["thinking"]},
                      {"type": "signature_delta", "signature": block["signature"]}]  # fmt: skip
        out.append(_sse("content_block_start",
                        {"type": "content_block_start", "index": n, "content_block": first}))  # fmt: skip
        for delta in deltas:
            out.append(_sse("content_block_delta",
                            {"type": "content_block_delta", "index": n, "delta": delta}))  # fmt: skip
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": n}))
    out.append(_sse("message_delta", {"type": "message_delta",
                                      "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                      "usage": {"output_tokens": 5}}))  # fmt: skip
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return out


def _openai_message(blocks: Blocks) -> dict[str, Any]:
    said = "".join(b["text"] for b in blocks if b["type"] == "text")
    tool_calls = [
        {"id": b["id"].replace("toolu_", "call_"), "type": "function",
         "function": {"name": b["name"], "arguments": json.dumps(b["input"])}}
        for b in blocks if b["type"] == "tool_use"
    ]  # fmt: skip
    message: dict[str, Any] = {"role": "assistant", "content": said or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def _openai_usage(body: dict[str, Any]) -> dict[str, Any]:
    prompt = _input_tokens(body)
    return {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5,
            "prompt_tokens_details": {"cached_tokens": CACHED}}  # fmt: skip


def _openai_completion(blocks: Blocks, body: dict[str, Any]) -> dict[str, Any]:
    message = _openai_message(blocks)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:20]}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body.get("model", "gpt-fake"),
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
        "usage": _openai_usage(body),
    }  # fmt: skip


def _openai_chunks(blocks: Blocks, body: dict[str, Any]) -> list[bytes]:
    done = _openai_completion(blocks, body)
    message = done["choices"][0]["message"]
    base = {"id": done["id"], "object": "chat.completion.chunk", "created": done["created"],
            "model": done["model"]}  # fmt: skip

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return f"data: {json.dumps({**base, 'choices': [choice]})}\n\n".encode()

    out = [chunk({"role": "assistant", "content": ""})]
    if message.get("content"):
        out += [
            chunk({"content": message["content"][:3]}),
            chunk({"content": message["content"][3:]}),
        ]
    for n, call in enumerate(message.get("tool_calls") or ()):
        out.append(chunk({"tool_calls": [{"index": n, "id": call["id"], "type": "function",
                                          "function": {"name": call["function"]["name"], "arguments": ""}}]}))  # fmt: skip
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {"index": n, "function": {"arguments": call["function"]["arguments"]}}
                    ]
                }
            )
        )
    out.append(chunk({}, done["choices"][0]["finish_reason"]))
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {**base, "choices": [], "usage": done["usage"]}
        out.append(f"data: {json.dumps(usage)}\n\n".encode())
    out.append(b"data: [DONE]\n\n")
    return out


def _responses_items(blocks: Blocks) -> list[dict[str, Any]]:
    """The reply as Responses output items: thinking a ``reasoning`` item (its signature the
    encrypted content), text a message, a tool use a ``function_call``."""
    items: list[dict[str, Any]] = []
    for block in blocks:
        if block["type"] == "thinking":
            items.append({"id": f"rs_{uuid.uuid4().hex[:20]}", "type": "reasoning",
                          "summary": [{"type": "summary_text", "text": block["thinking"]}],
                          "encrypted_content": block["signature"]})  # fmt: skip
        elif block["type"] == "text":
            items.append({"id": f"msg_{uuid.uuid4().hex[:20]}", "type": "message",
                          "role": "assistant", "status": "completed",
                          "content": [{"type": "output_text", "text": block["text"], "annotations": []}]})  # fmt: skip
        else:
            items.append({"id": f"fc_{uuid.uuid4().hex[:20]}", "type": "function_call",
                          "call_id": block["id"].replace("toolu_", "call_"), "name": block["name"],
                          "arguments": json.dumps(block["input"]), "status": "completed"})  # fmt: skip
    return items


def _responses_response(blocks: Blocks, body: dict[str, Any]) -> dict[str, Any]:
    prompt = _input_tokens(body)
    return {
        "id": f"resp_{uuid.uuid4().hex[:20]}", "object": "response", "created_at": 1_700_000_000,
        "status": "completed", "model": body.get("model", "gpt-fake"), "error": None,
        "incomplete_details": None, "instructions": body.get("instructions"), "metadata": {},
        "output": _responses_items(blocks), "parallel_tool_calls": True, "temperature": 1.0,
        "tool_choice": "auto", "tools": body.get("tools") or [], "top_p": 1.0,
        "usage": {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": CACHED},
                  "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": prompt + 5},
    }  # fmt: skip


def _responses_events(blocks: Blocks, body: dict[str, Any]) -> list[bytes]:
    done = _responses_response(blocks, body)
    events: list[dict[str, Any]] = []
    start = {**done, "status": "in_progress", "output": [], "usage": None}
    events += [{"type": "response.created", "response": start},
               {"type": "response.in_progress", "response": start}]  # fmt: skip
    for n, item in enumerate(done["output"]):
        at = {"output_index": n, "item_id": item["id"]}
        if item["type"] == "message":
            said = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            events += [
                {"type": "response.output_item.added", "output_index": n, "item": {**item, "content": [], "status": "in_progress"}},
                {"type": "response.content_part.added", **at, "content_index": 0, "part": part},
                {"type": "response.output_text.delta", **at, "content_index": 0, "delta": said[:3], "logprobs": []},
                {"type": "response.output_text.delta", **at, "content_index": 0, "delta": said[3:], "logprobs": []},
                {"type": "response.output_text.done", **at, "content_index": 0, "text": said, "logprobs": []},
                {"type": "response.content_part.done", **at, "content_index": 0, "part": {**part, "text": said}},
            ]  # fmt: skip
        elif item["type"] == "function_call":
            raw = item["arguments"]
            events += [
                {"type": "response.output_item.added", "output_index": n, "item": {**item, "arguments": "", "status": "in_progress"}},
                {"type": "response.function_call_arguments.delta", **at, "delta": raw[:2]},
                {"type": "response.function_call_arguments.delta", **at, "delta": raw[2:]},
                {"type": "response.function_call_arguments.done", **at, "arguments": raw},
            ]  # fmt: skip
        else:
            events.append({"type": "response.output_item.added", "output_index": n, "item": item})
        events.append({"type": "response.output_item.done", "output_index": n, "item": item})
    events.append({"type": "response.completed", "response": done})
    return [_sse(e["type"], {**e, "sequence_number": n}) for n, e in enumerate(events)]


class ScriptedUpstream:
    """The server (uvicorn in a thread on a free port); ``url`` is its base."""

    def __init__(self, script: Script | None = None) -> None:
        self.script: Script = script or (lambda protocol, body: text("ok, done"))
        self.seen: list[Seen] = []
        self.streamed: list[bytes] = []
        """Each streamed answer's bytes, as sent."""
        self._lock = threading.Lock()
        self.url = ""
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response, StreamingResponse
        from starlette.routing import Route

        async def record(request: Request) -> dict[str, Any]:
            raw = await request.body()
            body = json.loads(raw) if raw else {}
            with self._lock:
                self.seen.append(
                    Seen(request.url.path, dict(request.headers), body, request.url.query)
                )
            return body

        def stream(parts: list[bytes]) -> StreamingResponse:
            with self._lock:
                self.streamed.append(b"".join(parts))

            async def gen() -> AsyncIterator[bytes]:
                for part in parts:
                    yield part

            return StreamingResponse(gen(), media_type="text/event-stream")

        async def messages(request: Request) -> Response:
            body = await record(request)
            blocks = self.script("anthropic", body)
            if body.get("stream"):
                return stream(_anthropic_events(blocks, body))
            return JSONResponse(_anthropic_message(blocks, body))

        async def count(request: Request) -> Response:
            return JSONResponse({"input_tokens": _input_tokens(await record(request))})

        async def chat(request: Request) -> Response:
            body = await record(request)
            blocks = self.script("openai", body)
            if body.get("stream"):
                return stream(_openai_chunks(blocks, body))
            return JSONResponse(_openai_completion(blocks, body))

        async def responses(request: Request) -> Response:
            body = await record(request)
            blocks = self.script("responses", body)
            if body.get("stream"):
                return stream(_responses_events(blocks, body))
            return JSONResponse(_responses_response(blocks, body))

        async def compact(request: Request) -> Response:
            body = await record(request)
            items = body.get("input") if isinstance(body.get("input"), list) else []
            users = [
                {"id": f"msg_{uuid.uuid4().hex[:20]}", "type": "message", "role": "user",
                 "status": "completed", "content": [{"type": "input_text", "text": i["content"]}]}
                if isinstance(i.get("content"), str) else i
                for i in items if isinstance(i, dict) and i.get("role") == "user"
            ]  # fmt: skip
            output = [*users, {"id": f"cmp_{uuid.uuid4().hex[:20]}", "type": "compaction",
                               "encrypted_content": f"opaque-{len(items)}-items"}]  # fmt: skip
            return JSONResponse({"id": f"resp_{uuid.uuid4().hex[:20]}", "object": "response.compaction",
                                 "created_at": 1_700_000_000, "output": output,
                                 "usage": _responses_response([], body)["usage"]})  # fmt: skip

        async def models(request: Request) -> Response:
            await record(request)
            model = {"id": "claude-fake-1", "type": "model", "display_name": "Fake",
                     "created_at": "2025-01-01T00:00:00Z", "object": "model", "created": 0,
                     "owned_by": "fake"}  # fmt: skip
            return JSONResponse({"data": [model], "has_more": False, "first_id": "claude-fake-1",
                                 "last_id": "claude-fake-1", "object": "list"})  # fmt: skip

        return Starlette(routes=[
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", count, methods=["POST"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/v1/responses/compact", compact, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ])  # fmt: skip

    def start(self) -> ScriptedUpstream:
        self._server, self._thread, port = start_server(self.app())
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        stop_server(self._server, self._thread)

    def bodies(self, path: str = "/v1/messages") -> list[Any]:
        with self._lock:
            return [s.body for s in self.seen if s.path == path]


def start_server(app: Any, sock: Any = None) -> tuple[Any, threading.Thread, int]:
    """``app`` served by uvicorn in a daemon thread on ``sock`` (a free loopback port)."""
    import socket
    import time

    import uvicorn

    if sock is None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(1000):
        if server.started:
            break
        time.sleep(0.01)
    return server, thread, port


def stop_server(server: Any, thread: threading.Thread | None) -> None:
    if server is not None:
        server.should_exit = True
    if thread is not None:
        thread.join(timeout=10)
