"""The proxy's engine side: each request's conversation, its render, and the records.

:meth:`Proxy.prepare` turns a client's request into the one that goes upstream: the
conversation's session (recognised by ``_sessions``) mirrors the request's messages (only
what is new is appended) and renders them under its budget; the wire module builds the
request back from the render. Anything that fails on the way sends the client's request
upstream unchanged and writes a record of why (fail-open): the user's agent never breaks
because of us. A record never holds a header, so a provider key is never stored or logged.

Records go to ``proxy.jsonl`` in the state folder (one line per request: sent, side call,
fail-open, with the provider's usage when it reported one, and how its render got its
summaries) and, for a session, to the receipt of the render it sent
(``RenderReceipt.usage``: input, cached read and write, output).

Summaries are written by the policy's ``summarizer_model`` (``--summarizer-model``), else
offline; under ``--summary-wait never`` no request waits for one (``Policy.summary_wait``).

The first conversation's render sets the objects the process holds aside from the garbage
collector's full collections (``integrations._gc``; ``OPENPROGRAM_GC_FREEZE=0``: never):
otherwise a full collection walks a long history's nodes and render state every few dozen
requests, 100–200 ms inside one of them.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import msgspec

from context import Policy, ProviderUsage, Summarizer
from graph import Store, ToolSchema
from openprogram import _service as service
from openprogram._json import JSONObject
from openprogram._runtime._session import Session
from openprogram.integrations._gc import freeze_once
from openprogram.integrations._mirror import Mirror
from openprogram.proxy import _anthropic, _compact, _history_tools, _openai_chat, _responses
from openprogram.proxy._bodies import Request, UsageCounts
from openprogram.proxy._convert import Converted, Made
from openprogram.proxy._kept_bodies import KeptBodies
from openprogram.proxy._sessions import NAMED, recognise, side_call

__all__ = ["Prepared", "Proxy", "ProxyConfig"]

NAME = "proxy"
LOG = "proxy.jsonl"
WIRES = {"anthropic": _anthropic, "openai": _openai_chat, "responses": _responses}
HISTORY = {"anthropic": "messages", "openai": "messages", "responses": "input"}
"""Each wire's member that holds the history (what a later request's bytes repeat)."""
_LINE = json.JSONEncoder(ensure_ascii=False)
"""A record's line (``json.dumps`` with options builds an encoder per call)."""
KEPT_CONVERSIONS = 64
"""Conversations whose last request is kept converted (the least recently used go)."""


@dataclass(frozen=True)
class ProxyConfig:
    """What ``openprogram proxy`` was started with."""

    db: str | None = None
    state_dir: str | None = None
    budget: int | None = None
    policy: str = "claude-code"
    upstream_anthropic: str = "https://api.anthropic.com"
    upstream_openai: str = "https://api.openai.com"
    redact: bool = False
    summary_wait: str = "always"
    """``never``: no request waits for a summary (``Policy.summary_wait``)."""
    summarizer_model: str | None = None
    """A litellm model for summaries, cheaper than the agent's (``Policy.summarizer_model``)."""
    history_tools: bool = True
    """Offer the session's history tools upstream and answer them here (``_rounds``)."""


@dataclass
class Prepared:
    """What goes upstream for one request, and what its record says."""

    body: bytes
    protocol: str
    event: str
    """``sent`` (the render), ``side-call``, ``fail-open`` or ``passed`` (not a turn)."""
    session: str | None = None
    receipt: str | None = None
    reason: str | None = None
    model: str | None = None
    tokens: int | None = None
    budget: int | None = None
    started: float = field(default_factory=time.perf_counter)
    prepare_ms: float = 0.0
    summary: str = ""
    """How its render got its summaries (``Rendered.summary``)."""
    history: tuple[str, ...] = ()
    """The history tools offered upstream beside the client's (answered by the proxy)."""
    request: Request | None = None
    """The request sent, as an object (kept when history tools were offered)."""


class Proxy:
    """Sessions and records of one proxy (one database)."""

    def __init__(
        self,
        config: ProxyConfig,
        *,
        store: Store | None = None,
        summarizer: Summarizer | None = None,
    ) -> None:
        self.config = config
        self.summarizer = summarizer
        """What writes new sessions' summaries (None: the policy's ``summarizer_model``)."""
        self.store = store if store is not None else service.open_store(config.db, create=True)
        folder = service.folder_of(self.store, config.state_dir)
        folder.claim()
        self.folder = folder.path
        self.log = Path(self.folder) / LOG
        self._sessions: dict[str, tuple[Session, Mirror]] = {}
        self._bodies = KeptBodies()
        """The last bodies decoded (the next decodes only past the bytes it repeats)."""
        self._converted: dict[tuple[str, str], tuple[Converted, Made]] = {}
        """Each conversation's last request, converted (the next converts only what is new),
        and what it built for the messages compaction made."""
        self._schemas: list[ToolSchema] | None = None
        self._windows: dict[str, _compact.Window | None] = {}
        self._lock = threading.Lock()
        self._log_lock = threading.Lock()
        self._in_flight = 0
        self._settled = threading.Condition()

    # -- sessions -------------------------------------------------------------------------
    def policy(self, model: str | None, *, scratch: bool = False) -> Policy:
        """New sessions' policy; ``scratch``: a counting render's (offline summaries, none
        left running on a worker after it)."""
        options: dict[str, str] = {"cache_edits": "off"}
        if not scratch:
            options["summary_wait"] = self.config.summary_wait
        if self.config.summarizer_model and not scratch:
            options["summarizer_model"] = self.config.summarizer_model
        try:
            return Policy.named(self.config.policy, model, **options)
        except Exception:  # a model litellm's map does not know: the preset's defaults
            return Policy.named(self.config.policy, None, **options)

    def session(self, session_id: str, model: str | None) -> tuple[Session, Mirror]:
        found = self._sessions.get(session_id)
        if found is None:
            if self.store.has_session(session_id):
                session = Session(
                    self.store,
                    session_id,
                    state_dir=self.config.state_dir,
                    summarizer=self.summarizer,
                )
            else:
                session = Session(
                    self.store,
                    session_id,
                    policy=self.policy(model),
                    budget=self.config.budget,
                    state_dir=self.config.state_dir,
                    redact=self.config.redact or None,
                    summarizer=self.summarizer,
                )
            found = self._sessions[session_id] = (session, Mirror(session, NAME))
        return found

    # -- requests -------------------------------------------------------------------------
    def prepare(self, protocol: str, headers: Mapping[str, str], raw: bytes) -> Prepared:
        """The request to send upstream for ``raw`` (see the module docstring)."""
        started = time.perf_counter()
        prepared = Prepared(raw, protocol, "passed", started=started)
        try:
            body = cast(Request, self._bodies.decode(raw, HISTORY[protocol]))
            if not isinstance(body, dict):
                raise ValueError("the body is not a JSON object")
            prepared.model = str(body.get("model") or "") or None
            why = side_call(headers, body) if protocol == "anthropic" else None
            if why is not None:
                prepared.event, prepared.reason = "side-call", why
                return prepared
            if protocol == "responses" and (why := _responses.server_state(body, raw)) is not None:
                prepared.reason = why  # passed as it came: we hold only part of it
                if headers.get(NAMED):  # the client's session: the record says which
                    prepared.session = recognise(headers, body, "", "").session
                return prepared
            wire = WIRES[protocol]
            conversation = recognise(headers, body, *wire.peek(body))
            prepared.session = conversation.session
            with self._lock:
                session, mirror = self.session(conversation.session, prepared.model)
                if protocol == "responses":  # a window OpenAI compacted: the history it replaced
                    body = _compact.expand(body, self._window(session))
                # by protocol too: one conversation's messages may look alike on two wires
                key = (protocol, conversation.session)
                previous, made = self._converted.pop(key, (None, Made()))
                converted = wire.from_request(body, previous)
                self._converted[key] = (converted, made)
                while len(self._converted) > KEPT_CONVERSIONS:
                    del self._converted[next(iter(self._converted))]
                ours = self._offered(protocol, body, session)
                paired = mirror.render(
                    converted.entries,
                    [*converted.tools, *ours],
                    converted.system,
                    conversation=conversation.client_id,
                )
                rendered = mirror.last
                freeze_once()  # what the first conversation loaded: out of full collections
                if rendered is not None and rendered.id:  # its receipt carries its id
                    prepared.receipt = rendered.id
                else:
                    receipt = session.receipt()
                    prepared.receipt = receipt.id if receipt is not None else None
            request = wire.to_request(body, paired, made)
            if ours:
                prepared.history = _history_tools.offer(protocol, request, ours)
                prepared.request = request
            prepared.body = msgspec.json.encode(request)
            prepared.event = "sent"
            if rendered is not None:
                prepared.tokens, prepared.budget = rendered.tokens, rendered.budget
                prepared.summary = rendered.summary
        except Exception as error:  # fail open: the client's request goes as it came
            prepared.body = raw
            prepared.event = "fail-open"
            prepared.reason = f"{type(error).__name__}: {error}"
        finally:
            prepared.prepare_ms = (time.perf_counter() - started) * 1000
        return prepared

    def _offered(self, protocol: str, body: Request, session: Session) -> list[ToolSchema]:
        """The history tools this request gets (chat schemas; none when they are off)."""
        if not self.config.history_tools or protocol not in _history_tools.PROTOCOLS:
            return []
        if self._schemas is None:
            self._schemas = _history_tools.schemas(session, set())
        taken = _history_tools.client_names(protocol, body)
        return [s for s in self._schemas if s["function"]["name"] not in taken]

    def _window(self, session: Session) -> _compact.Window | None:
        if session.id not in self._windows:
            self._windows[session.id] = _compact.window(session)
        return self._windows[session.id]

    def adopt_compaction(
        self, prepared: Prepared, headers: Mapping[str, str], raw: bytes, answer: bytes
    ) -> None:
        """Keep what ``/v1/responses/compact`` returned as a provider layer of the request's
        session (``_compact``); the request's record says which layer, or why none."""
        try:
            body: Request = msgspec.json.decode(raw)
            output = msgspec.json.decode(answer).get("output")
            conversation = recognise(headers, body, *_responses.peek(body))
            prepared.session = conversation.session
            if not self.store.has_session(conversation.session):
                prepared.reason = "responses/compact: a conversation the proxy has not seen"
                return
            with self._lock:
                session, mirror = self.session(conversation.session, prepared.model)
                body = _compact.expand(body, self._window(session))
                converted = _responses.from_request(body)
                layer, kept = _compact.adopt(session, mirror, converted, output, body["input"])
                if kept is not None:
                    self._windows[session.id] = kept
            prepared.reason = (
                f"responses/compact: kept as provider layer {layer.id}"
                if layer is not None
                else "responses/compact: no compaction item, or nothing it could cover"
            )
        except Exception as error:  # the client's answer goes back whatever happens here
            prepared.reason = f"responses/compact: not kept ({type(error).__name__}: {error})"

    def answer_history(
        self, prepared: Prepared, calls: list[_history_tools.HistoryCall]
    ) -> list[tuple[_history_tools.HistoryCall, str]]:
        """Each history call answered from the request's session (each recorded)."""
        if prepared.session is None:
            return [(call, "Error: no session") for call in calls]
        out = []
        with self._lock:
            session, _ = self.session(prepared.session, prepared.model)
            for call in calls:
                out.append((call, _history_tools.answer(session, call)))
        for call, text in out:
            self.record(
                {"event": "history-tool", "protocol": prepared.protocol,
                 "session": prepared.session, "receipt": prepared.receipt, "tool": call.name,
                 "arguments": call.arguments, "chars": len(text)}
            )  # fmt: skip
        return out

    def count(self, headers: Mapping[str, str], raw: bytes) -> Prepared:
        """A ``count_tokens`` request as it would be sent: rendered in a scratch session
        with the same policy and budget, its summaries written offline (nothing is stored,
        no summarizer is paid for a count); fail-open as :meth:`prepare`."""
        prepared = Prepared(raw, "anthropic", "passed")
        try:
            body = json.loads(raw)
            converted = _anthropic.from_request(body)
            model = str(body.get("model") or "") or None
            policy = self.policy(model, scratch=True)
            with Session(":memory:", policy=policy, budget=self.config.budget) as s:
                mirror = Mirror(s, NAME)
                paired = mirror.render(converted.entries, converted.tools, converted.system)
            prepared.body = json.dumps(_anthropic.to_request(body, paired)).encode()
            prepared.event = "counted"
        except Exception as error:
            prepared.body, prepared.event = raw, "fail-open"
            prepared.reason = f"{type(error).__name__}: {error}"
        return prepared

    def begin(self) -> None:
        """A request is on its way upstream (:meth:`finish` records it)."""
        with self._settled:
            self._in_flight += 1

    def settle(self, timeout: float = 10.0) -> bool:
        """Wait until every request begun has been recorded (False: ``timeout`` passed)."""
        with self._settled:
            return self._settled.wait_for(lambda: self._in_flight <= 0, timeout)

    def finish(self, prepared: Prepared, status: int, usage: UsageCounts | None) -> None:
        """Record a request once its answer has passed: the log line, and the provider's
        usage beside the receipt of the render it answered."""
        try:
            self._finish(prepared, status, usage)
        finally:
            with self._settled:
                self._in_flight -= 1
                self._settled.notify_all()

    def _finish(self, prepared: Prepared, status: int, usage: UsageCounts | None) -> None:
        if usage is not None and prepared.receipt is not None and prepared.session is not None:
            found = self._sessions.get(prepared.session)
            storage = found[0].engine.storage if found is not None else None
            if storage is not None:
                storage.put_usage(prepared.receipt, provider_usage(usage))
        self.record(
            {
                "event": prepared.event,
                "protocol": prepared.protocol,
                "session": prepared.session,
                "model": prepared.model,
                "receipt": prepared.receipt,
                "tokens": prepared.tokens,
                "budget": prepared.budget,
                "reason": prepared.reason,
                "status": status,
                "usage": usage,
                "prepare_ms": round(prepared.prepare_ms, 3),
                "summary": prepared.summary or None,
            }
        )

    def record(self, fields: JSONObject) -> None:
        """One line of ``proxy.jsonl`` (appended with one ``write``: no buffered file)."""
        line = {"at": datetime.now(UTC).isoformat(timespec="milliseconds"), **fields}
        written = (_LINE.encode(line) + "\n").encode()
        with self._log_lock:
            out = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            try:
                rest = memoryview(written)
                while rest:
                    rest = rest[os.write(out, rest) :]
            finally:
                os.close(out)

    def records(self) -> list[JSONObject]:
        """Every request's record, oldest first (once those in flight are recorded)."""
        self.settle()
        if not self.log.exists():
            return []
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def usage(self, session: str) -> dict[str, UsageCounts]:
        """The provider's usage of each of ``session``'s requests, by receipt id (as the
        records say it: ``input`` uncached, ``cache_read``, ``cache_creation``, ``output``)."""
        self.settle()
        with self._lock:
            found = self._sessions.get(session)
            storage = found[0].engine.storage if found is not None else None
            receipts = storage.receipts() if storage is not None else []
        return {r.id: usage_fields(r.usage) for r in receipts if r.usage is not None}

    def close(self) -> None:
        self.settle()
        with self._lock:
            for session, _ in self._sessions.values():
                session.close()
            self._sessions.clear()
        self.store.close()


def provider_usage(usage: UsageCounts) -> ProviderUsage:
    """A record's usage (``_upstream.usage_of``) in the receipt's terms."""
    read, written = usage.get("cache_read", 0), usage.get("cache_creation", 0)
    return ProviderUsage(
        input_tokens=usage.get("input", 0) + read + written,
        cached_input_tokens=read,
        cache_write_tokens=written,
        output_tokens=usage.get("output", 0),
    )


def usage_fields(usage: ProviderUsage) -> UsageCounts:
    """A receipt's usage as a record says it (the inverse of :func:`provider_usage`)."""
    read, written = usage.cached_input_tokens, usage.cache_write_tokens
    return {
        "input": usage.input_tokens - read - written,
        "cache_read": read,
        "cache_creation": written,
        "output": usage.output_tokens,
    }
