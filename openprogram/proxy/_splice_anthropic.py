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
from collections.abc import Sequence

from openprogram._json import JSONObject, count, obj, objects
from openprogram.proxy._bodies import Request, Usage
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


def _call(block: JSONObject) -> HistoryCall:
    return HistoryCall(str(block["id"]), str(block["name"]), json.dumps(block.get("input") or {}))


class AnthropicSplice:
    """One client request's answer over its rounds (see the module docstring)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = frozenset(names)
        self.rounds = 0
        self.next_index = 0
        self.changed = False
        self.totals: Usage = dict.fromkeys(USAGE_KEYS, 0)
        self._new_round()

    def _new_round(self) -> None:
        self.mapping: dict[int, int | None] = {}
        self.blocks: dict[int, dict[str, object]] = {}
        self.partial: dict[int, str] = {}
        self.held: list[Event] = []
        self.closing: JSONObject | None = None
        self.round_usage: Usage = {}
        self.client_calls = 0

    # -- streamed --------------------------------------------------------------------------
    def feed(self, event: Event) -> list[bytes]:
        """What the client gets now of one upstream event."""
        data, kind = event.data, event.name
        if not isinstance(data, dict):
            return [event.raw]
        if kind == "message_start":
            usage = obj(obj(data.get("message")).get("usage"))
            self.round_usage.update(
                {k: count(v) for k, v in usage.items() if k in USAGE_KEYS and v}
            )
            return [event.raw] if self.rounds == 0 else []
        if kind in ("message_delta", "message_stop"):
            self.held.append(event)
            if kind == "message_delta":
                self.closing = data
                usage = obj(data.get("usage"))
                self.round_usage.update(
                    {k: count(v) for k, v in usage.items() if k in USAGE_KEYS and v is not None}
                )
            return []
        if kind.startswith("content_block_") and isinstance(index := data.get("index"), int):
            return self._block(event, data, index)
        return [event.raw]

    def _block(self, event: Event, data: JSONObject, index: int) -> list[bytes]:
        if event.name == "content_block_start":
            block = dict(obj(data.get("content_block")))
            self.blocks[index] = block
            ours = block.get("type") == "tool_use" and block.get("name") in self.names
            if block.get("type") == "tool_use" and not ours:
                self.client_calls += 1
            self.mapping[index] = None if ours else self.next_index
            if not ours:
                self.next_index += 1
        elif event.name == "content_block_delta":
            self._grow(index, obj(data.get("delta")))
        shown = self.mapping.get(index, index)
        if shown is None:
            self.changed = True
            return []
        if shown == index:
            return [event.raw]
        self.changed = True
        return [encode(event.name, {**data, "index": shown})]

    def _grow(self, index: int, delta: JSONObject) -> None:
        block = self.blocks.setdefault(index, {})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = str(block.get("text", "")) + str(delta.get("text", ""))
        elif kind == "thinking_delta":
            block["thinking"] = str(block.get("thinking", "")) + str(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = str(delta.get("signature", ""))
        elif kind == "input_json_delta":
            self.partial[index] = self.partial.get(index, "") + str(delta.get("partial_json", ""))

    def content(self) -> list[JSONObject]:
        """The round's assistant content, every block (for the continuation)."""
        out: list[JSONObject] = []
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

    def continuation(self, request: Request, results: Answered) -> Request:
        """The next round's request: this round's answer and the history tools' results."""
        answered: list[JSONObject] = [
            {"type": "tool_result", "tool_use_id": call.id, "content": reply}
            for call, reply in results
        ]
        messages: list[object] = [
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

        def rewrite(event: Event, data: JSONObject) -> bytes | None:
            if event.name != "message_delta":
                return None
            delta = dict(obj(data.get("delta")))
            if cut or (delta.get("stop_reason") == "tool_use" and not self.client_calls):
                delta["stop_reason"] = "end_turn"
            return encode(event.name, {**data, "delta": delta, "usage": totals})

        return closing(self.held, self.changed, rewrite)

    # -- a whole JSON answer ----------------------------------------------------------------
    def json_ours(self, answer: JSONObject) -> bool:
        """Whether a JSON round calls a history tool at all."""
        return any(
            b.get("type") == "tool_use" and b.get("name") in self.names
            for b in objects(answer.get("content"))
        )

    def merge(self, answers: Sequence[JSONObject]) -> JSONObject:
        """The client's answer from each round's JSON: the first's id, the last's stop, every
        round's content but the history calls, usage summed."""
        content = [
            b
            for a in answers
            for b in objects(a.get("content"))
            if not (b.get("type") == "tool_use" and b.get("name") in self.names)
        ]
        totals: Usage = dict.fromkeys(USAGE_KEYS, 0)
        for one in answers:
            usage = obj(one.get("usage"))
            add_usage(totals, {key: count(usage.get(key)) for key in USAGE_KEYS})
        last = answers[-1]
        stop = last.get("stop_reason")
        if stop == "tool_use" and not any(b.get("type") == "tool_use" for b in content):
            stop = "end_turn"
        return {
            **answers[0],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": last.get("stop_sequence"),
            "usage": {**obj(answers[0].get("usage")), **totals},
        }

    def json_calls(self, answer: JSONObject) -> list[HistoryCall]:
        """A JSON round's history calls the proxy answers (none if the client has calls)."""
        blocks = [b for b in objects(answer.get("content")) if b.get("type") == "tool_use"]
        ours = [b for b in blocks if b.get("name") in self.names]
        return answerable(ours, len(blocks) - len(ours), _call)

    def json_continuation(self, request: Request, answer: JSONObject, results: Answered) -> Request:
        answered: list[JSONObject] = [
            {"type": "tool_result", "tool_use_id": call.id, "content": reply}
            for call, reply in results
        ]
        messages: list[object] = [
            *request["messages"],
            {"role": "assistant", "content": answer.get("content") or []},
            {"role": "user", "content": answered},
        ]
        return {**request, "messages": messages}
