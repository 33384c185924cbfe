"""Several upstream Anthropic Messages rounds as the one answer the client sees.

The events of a round pass as they came, except a ``tool_use`` block of a history tool
(left out), and the closing ``message_delta``/``message_stop``, held until it is known
whether the proxy continues. A continuation's ``message_start`` is left out, its blocks are
numbered after those the client has, its thinking blocks pass with their signatures, and
the last round's closing events carry the usage of every round, summed. While no history
tool is called, every event passes byte for byte.
"""

from __future__ import annotations

import json
from typing import Any

from openprogram.proxy._history_tools import HistoryCall
from openprogram.proxy._splice import Answered, add_usage, answerable, closing
from openprogram.proxy._sse import Event, encode

__all__ = ["AnthropicSplice"]

USAGE_KEYS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
)


def _call(block: dict[str, Any]) -> HistoryCall:
    return HistoryCall(str(block["id"]), str(block["name"]), json.dumps(block.get("input") or {}))


class AnthropicSplice:
    """One client request's answer over its rounds (see the module docstring)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = frozenset(names)
        self.rounds = 0
        self.next_index = 0
        self.changed = False
        self.totals = dict.fromkeys(USAGE_KEYS, 0)
        self._new_round()

    def _new_round(self) -> None:
        self.mapping: dict[int, int | None] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial: dict[int, str] = {}
        self.held: list[Event] = []
        self.closing: dict[str, Any] | None = None
        self.round_usage: dict[str, int] = {}
        self.client_calls = 0

    # -- streamed --------------------------------------------------------------------------
    def feed(self, event: Event) -> list[bytes]:
        """What the client gets now of one upstream event."""
        data, kind = event.data, event.name
        if not isinstance(data, dict):
            return [event.raw]
        if kind == "message_start":
            usage = (data.get("message") or {}).get("usage") or {}
            self.round_usage.update({k: int(v) for k, v in usage.items() if k in USAGE_KEYS and v})
            return [event.raw] if self.rounds == 0 else []
        if kind in ("message_delta", "message_stop"):
            self.held.append(event)
            if kind == "message_delta":
                self.closing = data
                usage = data.get("usage") or {}
                self.round_usage.update(
                    {k: int(v) for k, v in usage.items() if k in USAGE_KEYS and v is not None}
                )
            return []
        if kind.startswith("content_block_") and isinstance(data.get("index"), int):
            return self._block(event, data)
        return [event.raw]

    def _block(self, event: Event, data: dict[str, Any]) -> list[bytes]:
        index = data["index"]
        if event.name == "content_block_start":
            block = dict(data.get("content_block") or {})
            self.blocks[index] = block
            ours = block.get("type") == "tool_use" and block.get("name") in self.names
            if block.get("type") == "tool_use" and not ours:
                self.client_calls += 1
            self.mapping[index] = None if ours else self.next_index
            if not ours:
                self.next_index += 1
        elif event.name == "content_block_delta":
            self._grow(index, data.get("delta") or {})
        shown = self.mapping.get(index, index)
        if shown is None:
            self.changed = True
            return []
        if shown == index:
            return [event.raw]
        self.changed = True
        return [encode(event.name, {**data, "index": shown})]

    def _grow(self, index: int, delta: dict[str, Any]) -> None:
        block = self.blocks.setdefault(index, {})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + str(delta.get("text", ""))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = str(delta.get("signature", ""))
        elif kind == "input_json_delta":
            self.partial[index] = self.partial.get(index, "") + str(delta.get("partial_json", ""))

    def content(self) -> list[dict[str, Any]]:
        """The round's assistant content, every block (for the continuation)."""
        out = []
        for index in sorted(self.blocks):
            block = dict(self.blocks[index])
            if block.get("type") == "tool_use" and index in self.partial:
                try:
                    block["input"] = json.loads(self.partial[index] or "{}")
                except ValueError:
                    block["input"] = {}
            out.append(block)
        return out

    def calls(self) -> list[HistoryCall]:
        """The round's history calls, when the proxy can answer them and go on (none: the
        client has calls of its own to answer, or the round ended otherwise)."""
        ours = [
            b for b in self.content() if b.get("type") == "tool_use" and b.get("name") in self.names
        ]
        return answerable(ours, self.client_calls, _call)

    def continuation(self, request: dict[str, Any], results: Answered) -> dict[str, Any]:
        """The next round's request: this round's answer and the history tools' results."""
        answered = [
            {"type": "tool_result", "tool_use_id": call.id, "content": text}
            for call, text in results
        ]
        messages = [
            *request["messages"],
            {"role": "assistant", "content": self.content()},
            {"role": "user", "content": answered},
        ]
        self._close_round()
        self.changed = True
        return {**request, "messages": messages}

    def _close_round(self) -> None:
        add_usage(self.totals, self.round_usage)
        self.rounds += 1
        self._new_round()

    def finish(self, *, cut: bool = False) -> list[bytes]:
        """The closing events; ``cut``: the last round still called history tools only."""
        totals = dict(self.totals)
        add_usage(totals, self.round_usage)

        def rewrite(event: Event, data: dict[str, Any]) -> bytes | None:
            if event.name != "message_delta":
                return None
            delta = dict(data.get("delta") or {})
            if cut or (delta.get("stop_reason") == "tool_use" and not self.client_calls):
                delta["stop_reason"] = "end_turn"
            return encode(event.name, {**data, "delta": delta, "usage": totals})

        return closing(self.held, self.changed, rewrite)

    # -- a whole JSON answer ----------------------------------------------------------------
    def json_ours(self, answer: dict[str, Any]) -> bool:
        """Whether a JSON round calls a history tool at all."""
        return any(
            isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") in self.names
            for b in answer.get("content") or ()
        )

    def merge(self, answers: list[dict[str, Any]]) -> dict[str, Any]:
        """The client's answer from each round's JSON: the first's id, the last's stop, every
        round's content but the history calls, usage summed."""
        content = [
            b
            for a in answers
            for b in a.get("content") or ()
            if not (b.get("type") == "tool_use" and b.get("name") in self.names)
        ]
        totals = dict.fromkeys(USAGE_KEYS, 0)
        for one in answers:
            usage = one.get("usage") or {}
            add_usage(totals, {key: int(usage.get(key) or 0) for key in USAGE_KEYS})
        last = answers[-1]
        stop = last.get("stop_reason")
        if stop == "tool_use" and not any(b.get("type") == "tool_use" for b in content):
            stop = "end_turn"
        return {
            **answers[0],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": last.get("stop_sequence"),
            "usage": {**(answers[0].get("usage") or {}), **totals},
        }

    def json_calls(self, answer: dict[str, Any]) -> list[HistoryCall]:
        """A JSON round's history calls the proxy answers (none if the client has calls)."""
        blocks = [
            b
            for b in answer.get("content") or ()
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
        ours = [b for b in blocks if b.get("name") in self.names]
        return answerable(ours, len(blocks) - len(ours), _call)

    def json_continuation(
        self, request: dict[str, Any], answer: dict[str, Any], results: Answered
    ) -> dict[str, Any]:
        answered = [
            {"type": "tool_result", "tool_use_id": call.id, "content": text}
            for call, text in results
        ]
        messages = [
            *request["messages"],
            {"role": "assistant", "content": answer.get("content") or []},
            {"role": "user", "content": answered},
        ]
        return {**request, "messages": messages}
