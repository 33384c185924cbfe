"""Forwarding to the provider (httpx, streamed), and the usage it reports on the way.

Every header the client sent goes on (its key too: forwarded, never kept), except the
hop-by-hop ones, the ``Host``, our own ``X-OpenProgram-*`` and the body's length (the body
may be the render). The answer streams back byte for byte as it arrives; a
:class:`UsageReader` watches the same bytes for the provider's reported usage (a JSON body,
or the SSE events of a stream) without holding the stream.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import httpx

from openprogram._json import JSONObject, count, obj
from openprogram.proxy._bodies import UsageCounts

__all__ = ["UsageReader", "request_headers", "response_headers", "usage_of"]

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
     "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding"}
)  # fmt: skip
DROPPED_BACK = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}
)
MAX_JSON = 4_000_000
"""A non-streamed answer's body is read for usage up to this many bytes."""


def request_headers(headers: Mapping[str, str]) -> dict[str, str]:
    out = {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP}
    out = {k: v for k, v in out.items() if not k.lower().startswith("x-openprogram-")}
    out["accept-encoding"] = "identity"  # the bytes read for usage are the bytes sent on
    return out


def response_headers(headers: httpx.Headers) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in DROPPED_BACK}


def usage_of(report: JSONObject) -> UsageCounts:
    """A provider's usage object in the receipt's terms: ``input`` (uncached input),
    ``cache_read``, ``cache_creation`` and ``output`` tokens."""
    if "prompt_tokens" in report or "completion_tokens" in report:  # OpenAI
        cached = count(obj(report.get("prompt_tokens_details")).get("cached_tokens"))
        return {
            "input": max(0, count(report.get("prompt_tokens")) - cached),
            "cache_read": cached,
            "cache_creation": 0,
            "output": count(report.get("completion_tokens")),
        }
    if "input_tokens_details" in report:  # OpenAI Responses: input counts the cached too
        cached = count(obj(report.get("input_tokens_details")).get("cached_tokens"))
        return {
            "input": max(0, count(report.get("input_tokens")) - cached),
            "cache_read": cached,
            "cache_creation": 0,
            "output": count(report.get("output_tokens")),
        }
    return {
        "input": count(report.get("input_tokens")),
        "cache_read": count(report.get("cache_read_input_tokens")),
        "cache_creation": count(report.get("cache_creation_input_tokens")),
        "output": count(report.get("output_tokens")),
    }


class UsageReader:
    """Reads the usage a provider reports in an answer's bytes as they pass: a JSON
    body's ``usage``, or the ``data:`` lines of a stream (Anthropic's ``message_start``
    and ``message_delta``, OpenAI's last chunk, the Responses API's ``response.completed``)."""

    def __init__(self, streamed: bool) -> None:
        self.streamed = streamed
        self._pending = b""
        self._body = bytearray()
        self.usage: dict[str, object] = {}

    def feed(self, chunk: bytes) -> None:
        if not self.streamed:
            if len(self._body) < MAX_JSON:
                self._body += chunk
            return
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        for line in lines:
            if line.startswith(b"data:"):
                self._event(line[5:].strip())

    def _event(self, data: bytes) -> None:
        if not data or data == b"[DONE]" or b"usage" not in data:
            return
        try:
            event = json.loads(data)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        for key in ("message", "response"):  # Anthropic's message_start, response.completed
            inner = event.get(key)
            if isinstance(inner, dict) and isinstance(usage := inner.get("usage"), dict):
                self.usage.update(usage)
        if isinstance(usage := event.get("usage"), dict):
            self.usage.update({k: v for k, v in usage.items() if v is not None})

    def result(self) -> UsageCounts | None:
        if not self.streamed:
            try:
                body = json.loads(bytes(self._body))
            except ValueError:
                return None
            if isinstance(body, dict) and isinstance(usage := body.get("usage"), dict):
                return usage_of(usage)
            return None
        return usage_of(self.usage) if self.usage else None
