"""The upstream rounds of one client request when the model calls a history tool.

The first answer streams to the client as it arrives (spliced: ``_splice_anthropic``,
``_splice_chat``, ``_splice_responses``). If the round ends with calls to history tools
only, the proxy answers them from the session and sends the next round itself, at most
``MAX_ROUNDS`` in all; the client reads one answer. If the model also called the
client's tools, the history calls are left out and the client answers its own. A round
that fails upstream ends the answer as it stands (recorded).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping

import httpx
from starlette.concurrency import run_in_threadpool

from openprogram.proxy._bodies import Request
from openprogram.proxy._history_tools import MAX_ROUNDS
from openprogram.proxy._proxy import Prepared, Proxy
from openprogram.proxy._splice_anthropic import AnthropicSplice
from openprogram.proxy._splice_chat import ChatSplice
from openprogram.proxy._splice_responses import ResponsesSplice
from openprogram.proxy._sse import Events

__all__ = ["Rounds"]

Splice = AnthropicSplice | ChatSplice | ResponsesSplice
SPLICES: dict[str, Callable[[tuple[str, ...]], Splice]] = {
    "anthropic": AnthropicSplice,
    "openai": ChatSplice,
    "responses": ResponsesSplice,
}


class Rounds:
    """One client request's rounds (see the module docstring)."""

    def __init__(
        self,
        proxy: Proxy,
        prepared: Prepared,
        client: httpx.AsyncClient,
        url: str,
        headers: Mapping[str, str],
    ) -> None:
        self.proxy = proxy
        self.prepared = prepared
        self.client = client
        self.url = url
        self.headers = dict(headers)
        self.splice = SPLICES[prepared.protocol](prepared.history)

    async def _send(self, request: Request, *, stream: bool) -> httpx.Response:
        upstream = self.client.build_request(
            "POST", self.url, headers=self.headers, content=json.dumps(request).encode()
        )
        return await self.client.send(upstream, stream=stream)

    async def _failed(self, answer: httpx.Response) -> None:
        await answer.aread()
        await answer.aclose()
        self.proxy.record(
            {
                "event": "history-round-failed",
                "session": self.prepared.session,
                "status": answer.status_code,
                "body": answer.text[:500],
            }
        )

    async def stream(self, first: httpx.Response) -> AsyncIterator[bytes]:
        """The client's stream over every round."""
        request = self.prepared.request or {}
        answer, cut = first, False
        try:
            for number in range(MAX_ROUNDS):
                events = Events()
                async for chunk in answer.aiter_raw():
                    for event in events.feed(chunk):
                        for out in self.splice.feed(event):
                            yield out
                rest = events.rest()
                if rest:
                    yield rest
                await answer.aclose()
                calls = self.splice.calls()
                if not calls:
                    break
                if number == MAX_ROUNDS - 1:
                    cut = True
                    break
                results = await run_in_threadpool(self.proxy.answer_history, self.prepared, calls)
                request = self.splice.continuation(request, results)
                answer = await self._send(request, stream=True)
                if answer.status_code >= 400:
                    await self._failed(answer)
                    cut = True
                    break
            for out in self.splice.finish(cut=cut):
                yield out
        finally:
            await answer.aclose()

    async def whole(self, first: httpx.Response) -> AsyncIterator[bytes]:
        """The client's JSON answer over every round (the first as it came if no history
        tool was called)."""
        raw = await first.aread()
        await first.aclose()
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or not self.splice.json_ours(answer):
            yield raw
            return
        calls = self.splice.json_calls(answer)
        request = self.prepared.request or {}
        answers = [answer]
        for _ in range(MAX_ROUNDS - 1):
            results = await run_in_threadpool(self.proxy.answer_history, self.prepared, calls)
            request = self.splice.json_continuation(request, answers[-1], results)
            reply = await self._send(request, stream=False)
            if reply.status_code >= 400:
                await self._failed(reply)
                break
            answers.append(reply.json())
            calls = self.splice.json_calls(answers[-1])
            if not calls:
                break
        yield json.dumps(self.splice.merge(answers), ensure_ascii=False).encode()
