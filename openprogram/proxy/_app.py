"""The proxy's ASGI app (Starlette): the gate, the routes, and the streamed forwarding.

The gate is the viewer's ``Host`` check (a DNS-rebinding page gets a 403) and a token in
the path instead of a cookie, since an SDK's base URL is all a client can be given:
``http://127.0.0.1:P/<token>`` for Anthropic's SDK, ``…/<token>/v1`` for OpenAI's. A
request without the token is refused before anything is read.

``/v1/messages``, ``/v1/chat/completions`` and ``/v1/responses`` go upstream as the render
(``Proxy.prepare``);
``/v1/messages/count_tokens`` counts the request as it would be sent; any other path
(``/v1/models``…) passes through to the provider the client's headers name (Anthropic's
``anthropic-version`` or ``x-api-key``, else OpenAI's). The answer streams back unchanged,
unless the model calls a history tool the proxy offered (``_rounds``).
``/v1/responses/compact`` passes through, and its answer is kept as a layer (``_compact``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import AsyncIterator

import httpx
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from openprogram._view._app import host_allowed
from openprogram.proxy._proxy import Prepared, Proxy
from openprogram.proxy._rounds import Rounds
from openprogram.proxy._upstream import UsageReader, request_headers, response_headers

__all__ = ["create_app"]

TIMEOUT = httpx.Timeout(600.0, connect=30.0)


def _error(status: int, kind: str, message: str) -> JSONResponse:
    """An error both SDKs read (Anthropic's shape; OpenAI's reads ``error.message``)."""
    return JSONResponse({"type": "error", "error": {"type": kind, "message": message}}, status)


class Gate:
    """The ``Host`` check and the token that starts every path (stripped before routing)."""

    def __init__(self, app: ASGIApp, *, token: str, hosts: set[str]) -> None:
        self.app = app
        self.token = token
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = dict(scope.get("headers") or ()).get(b"host", b"").decode("latin-1")
        if not host_allowed(host, self.hosts):
            await _error(403, "permission_error", "unknown Host header")(scope, receive, send)
            return
        given, _, rest = str(scope["path"]).lstrip("/").partition("/")
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            message = "a token is needed: use the base URL `openprogram proxy` printed"
            await _error(403, "permission_error", message)(scope, receive, send)
            return
        path = "/" + rest
        inner = {**scope, "path": path, "raw_path": path.encode()}
        await self.app(inner, receive, send)


def create_app(proxy: Proxy, *, token: str, hosts: set[str]) -> Gate:
    """The app over ``proxy``, behind its :class:`Gate`."""
    clients: dict[int, httpx.AsyncClient] = {}
    recording: set[asyncio.Task[None]] = set()

    def client() -> httpx.AsyncClient:
        loop = id(asyncio.get_running_loop())
        if loop not in clients:
            clients[loop] = httpx.AsyncClient(timeout=TIMEOUT)
        return clients[loop]

    async def forward(request: Request, base: str, prepared: Prepared) -> Response:
        url = base.rstrip("/") + request.url.path
        if request.url.query:
            url += "?" + request.url.query
        proxy.begin()
        headers = request_headers(request.headers)
        upstream = client().build_request(
            request.method, url, headers=headers, content=prepared.body
        )
        try:
            answer = await client().send(upstream, stream=True)
        except httpx.HTTPError as error:
            prepared.reason = f"upstream unreachable: {type(error).__name__}"
            await run_in_threadpool(proxy.finish, prepared, 502, None)
            return _error(502, "api_error", f"openprogram proxy: {prepared.reason} ({base})")
        streamed = "text/event-stream" in answer.headers.get("content-type", "")
        reader = UsageReader(streamed)

        async def record() -> None:
            usage = reader.result() if answer.status_code < 400 else None
            await run_in_threadpool(proxy.finish, prepared, answer.status_code, usage)

        source: AsyncIterator[bytes] = answer.aiter_raw()
        if prepared.history and answer.status_code < 400:  # the model may look back first
            rounds = Rounds(proxy, prepared, client(), url, headers)
            source = rounds.stream(answer) if streamed else rounds.whole(answer)

        async def body() -> AsyncIterator[bytes]:
            try:
                async for chunk in source:
                    reader.feed(chunk)
                    yield chunk
            finally:
                await answer.aclose()
                # recorded beside the answer's end, so the client never waits for it
                task = asyncio.get_running_loop().create_task(record())
                recording.add(task)
                task.add_done_callback(recording.discard)

        return StreamingResponse(
            body(), status_code=answer.status_code, headers=response_headers(answer.headers)
        )

    async def messages(request: Request) -> Response:
        raw = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        prepared = await run_in_threadpool(proxy.prepare, "anthropic", headers, raw)
        return await forward(request, proxy.config.upstream_anthropic, prepared)

    async def count_tokens(request: Request) -> Response:
        raw = await request.body()
        prepared = await run_in_threadpool(proxy.count, dict(request.headers), raw)
        return await forward(request, proxy.config.upstream_anthropic, prepared)

    async def chat(request: Request) -> Response:
        raw = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        prepared = await run_in_threadpool(proxy.prepare, "openai", headers, raw)
        return await forward(request, proxy.config.upstream_openai, prepared)

    async def responses(request: Request) -> Response:
        raw = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        prepared = await run_in_threadpool(proxy.prepare, "responses", headers, raw)
        return await forward(request, proxy.config.upstream_openai, prepared)

    async def compact(request: Request) -> Response:
        raw = await request.body()
        prepared = Prepared(raw, "responses", "passed")
        headers = request_headers(request.headers)
        proxy.begin()
        url = proxy.config.upstream_openai.rstrip("/") + request.url.path
        try:
            answer = await client().post(url, content=raw, headers=headers)
        except httpx.HTTPError as error:
            prepared.reason = f"upstream unreachable: {type(error).__name__}"
            await run_in_threadpool(proxy.finish, prepared, 502, None)
            return _error(502, "api_error", f"openprogram proxy: {prepared.reason}")
        usage = None
        if answer.status_code < 400:
            own = {k.lower(): v for k, v in request.headers.items()}
            await run_in_threadpool(proxy.adopt_compaction, prepared, own, raw, answer.content)
            reader = UsageReader(False)
            reader.feed(answer.content)
            usage = reader.result()
        await run_in_threadpool(proxy.finish, prepared, answer.status_code, usage)
        return Response(answer.content, answer.status_code, response_headers(answer.headers))

    async def other(request: Request) -> Response:
        anthropic = "anthropic-version" in request.headers or "x-api-key" in request.headers
        base = proxy.config.upstream_anthropic if anthropic else proxy.config.upstream_openai
        prepared = Prepared(await request.body(), "anthropic" if anthropic else "openai", "passed")
        prepared.reason = f"{request.method} {request.url.path}"
        return await forward(request, base, prepared)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        for each in clients.values():
            await each.aclose()

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    routes = [
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/responses", responses, methods=["POST"]),
        Route("/v1/responses/compact", compact, methods=["POST"]),
        Route("/{path:path}", other, methods=methods),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    return Gate(app, token=token, hosts=hosts)


def env_lines(url: str, token: str) -> list[str]:
    """What to set, one line per SDK (they build paths differently)."""
    return [f"ANTHROPIC_BASE_URL={url}/{token}", f"OPENAI_BASE_URL={url}/{token}/v1"]
