"""Several upstream OpenAI Chat Completions rounds as the one completion the client sees.

The chunks of a round pass as they came, except the deltas of a history tool's call (left
out; the client's calls keep their order, numbered from 0) and the closing chunks (the one
with ``finish_reason``, the usage chunk, ``[DONE]``), held until it is known whether the
proxy continues. A continuation's chunks carry the first round's id and leave out its
opening role delta; the closing chunks carry the usage of every round, summed. While no
history tool is called, every chunk passes byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from openprogram._json import JSONObject, count, obj, objects, text
from openprogram.proxy._bodies import Request, Usage
from openprogram.proxy._history_tools import HistoryCall
from openprogram.proxy._splice import Answered, add_usage, answerable, closing
from openprogram.proxy._sse import Event

__all__ = ["ChatSplice"]


def _json_call(call: JSONObject) -> HistoryCall:
    function = obj(call["function"])
    return HistoryCall(
        str(call["id"]), str(function["name"]), text(function.get("arguments"), "{}")
    )


def _function(call: JSONObject) -> JSONObject:
    return obj(call.get("function"))


def _chunk(data: JSONObject) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


class ChatSplice:
    """One client request's completion over its rounds (see the module docstring)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = frozenset(names)
        self.rounds = 0
        self.changed = False
        self.first: JSONObject | None = None
        self.totals: Usage = {}
        self._new_round()

    def _new_round(self) -> None:
        self.mapping: dict[int, int | None] = {}
        self.calls_seen: dict[int, dict[str, str]] = {}
        self.text = ""
        self.held: list[Event] = []
        self.client_calls = 0

    # -- streamed --------------------------------------------------------------------------
    def feed(self, event: Event) -> list[bytes]:
        data = event.data
        if not isinstance(data, dict):
            self.held.append(event)  # [DONE]
            return []
        if self.first is None:
            self.first = data
        choices = objects(data.get("choices"))
        if not choices or choices[0].get("finish_reason"):
            self.held.append(event)
            return []
        delta = dict(obj(choices[0].get("delta")))
        self.text += text(delta.get("content"))
        calls = delta.get("tool_calls")
        if calls:
            kept = [self._call(call) for call in objects(calls)]
            delta["tool_calls"] = [c for c in kept if c is not None]
            if not delta["tool_calls"]:
                del delta["tool_calls"]
        if self.rounds:
            delta.pop("role", None)
            if delta == {"content": ""}:
                delta = {}
            if not delta:
                return []
        if delta == choices[0].get("delta") and not self.rounds:
            return [event.raw]
        if not delta:
            return []
        self.changed = True
        base = self.first if self.rounds else data
        out = {**data, "id": base.get("id"), "choices": [{**choices[0], "delta": delta}]}
        return [_chunk(out)]

    def _call(self, call: JSONObject) -> JSONObject | None:
        index = count(call.get("index"))
        function = _function(call)
        if index not in self.mapping:
            ours = function.get("name") in self.names
            self.mapping[index] = None if ours else self.client_calls
            self.client_calls += 0 if ours else 1
            self.calls_seen[index] = {"id": str(call.get("id")), "name": str(function.get("name")),
                                      "arguments": ""}  # fmt: skip
        self.calls_seen[index]["arguments"] += text(function.get("arguments"))
        shown = self.mapping[index]
        if shown is None:
            self.changed = True
            return None
        return call if shown == index else {**call, "index": shown}

    def calls(self) -> list[HistoryCall]:
        ours = [c for i, c in sorted(self.calls_seen.items()) if self.mapping.get(i) is None]
        return answerable(
            ours,
            self.client_calls,
            lambda c: HistoryCall(c["id"], c["name"], c["arguments"] or "{}"),
        )

    def continuation(self, request: Request, results: Answered) -> Request:
        calls = [{"id": c["id"], "type": "function",
                  "function": {"name": c["name"], "arguments": c["arguments"] or "{}"}}
                 for _, c in sorted(self.calls_seen.items())]  # fmt: skip
        said: list[JSONObject] = [
            {"role": "tool", "tool_call_id": call.id, "content": answer} for call, answer in results
        ]
        assistant: JSONObject = {
            "role": "assistant",
            "content": self.text or None,
            "tool_calls": calls,
        }
        for event in self.held:
            if isinstance(event.data, dict) and isinstance(usage := event.data.get("usage"), dict):
                add_usage(self.totals, usage)
        self.rounds += 1
        self.changed = True
        self._new_round()
        return {**request, "messages": [*request["messages"], assistant, *said]}

    def finish(self, *, cut: bool = False) -> list[bytes]:
        first = self.first or {}

        def rewrite(_: Event, given: JSONObject) -> bytes:
            data = {**given, "id": first.get("id", given.get("id"))}
            choices = objects(data.get("choices"))
            if (
                choices
                and (cut or not self.client_calls)
                and choices[0].get("finish_reason") == "tool_calls"
            ):
                data["choices"] = [{**choices[0], "finish_reason": "stop"}]
            if isinstance(usage := data.get("usage"), dict):
                totals = dict(self.totals)
                add_usage(totals, usage)
                data["usage"] = totals
            return _chunk(data)

        return closing(self.held, self.changed, rewrite)

    # -- a whole JSON answer ----------------------------------------------------------------
    def _message(self, answer: JSONObject) -> dict[str, object]:
        choices = objects(answer.get("choices")) or [{}]
        return dict(obj(choices[0].get("message")))

    def json_ours(self, answer: JSONObject) -> bool:
        calls = objects(self._message(answer).get("tool_calls"))
        return any(_function(c).get("name") in self.names for c in calls)

    def json_calls(self, answer: JSONObject) -> list[HistoryCall]:
        calls = objects(self._message(answer).get("tool_calls"))
        ours = [c for c in calls if _function(c).get("name") in self.names]
        return answerable(ours, len(calls) - len(ours), _json_call)

    def json_continuation(self, request: Request, answer: JSONObject, results: Answered) -> Request:
        said: list[JSONObject] = [
            {"role": "tool", "tool_call_id": call.id, "content": reply} for call, reply in results
        ]
        message = self._message(answer)
        return {**request, "messages": [*request["messages"], message, *said]}

    def merge(self, answers: Sequence[JSONObject]) -> JSONObject:
        messages = [self._message(a) for a in answers]
        said = "".join(text(m.get("content")) for m in messages)
        calls = [c for m in messages for c in objects(m.get("tool_calls"))
                 if _function(c).get("name") not in self.names]  # fmt: skip
        message = {**messages[-1], "content": said or None}
        message.pop("tool_calls", None)
        if calls:
            message["tool_calls"] = calls
        last = answers[-1]
        choice = {**(objects(last.get("choices")) or [{}])[0], "message": message}
        if not calls and choice.get("finish_reason") == "tool_calls":
            choice["finish_reason"] = "stop"
        totals: Usage = {}
        for one in answers:
            add_usage(totals, obj(one.get("usage")))
        return {**last, "id": answers[0].get("id"), "choices": [choice], "usage": totals}
