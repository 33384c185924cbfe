"""Several upstream OpenAI Responses rounds as the one response the client sees.

The events of a round pass as they came, except those of a history tool's
``function_call`` item (left out) and the closing ``response.completed`` (or
``response.incomplete``), held until it is known whether the proxy continues. A
continuation's ``response.created``/``response.in_progress`` are left out; every event
passed gets the client's next ``sequence_number`` and its item the client's next
``output_index``; the closing event is the first response's, with every item the client
was shown and the usage of every round summed. While no history tool is called, every
event passes byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence

from openprogram._json import JSONObject, items, obj, objects, text
from openprogram.proxy._bodies import Request, Usage
from openprogram.proxy._history_tools import HistoryCall
from openprogram.proxy._splice import Answered, add_usage, answerable, closing
from openprogram.proxy._sse import Event, encode

__all__ = ["ResponsesSplice"]

CLOSING = ("response.completed", "response.incomplete")
OPENING = ("response.created", "response.in_progress", "response.queued")


def _call(item: JSONObject) -> HistoryCall:
    return HistoryCall(str(item["call_id"]), str(item["name"]), text(item.get("arguments"), "{}"))


def input_items(request: Request) -> list[object]:
    given = request.get("input")
    return [{"role": "user", "content": given}] if isinstance(given, str) else list(given or ())


def _sendable(items: list[JSONObject], request: Request) -> list[JSONObject]:
    """A round's items as input again: a reasoning item without its encrypted content can
    only be read back from the provider's store, so without ``store`` it stays out."""
    if request.get("store") is not False:
        return items
    return [i for i in items if i.get("type") != "reasoning" or i.get("encrypted_content")]


class ResponsesSplice:
    """One client request's response over its rounds (see the module docstring)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = frozenset(names)
        self.rounds = 0
        self.sequence = 0
        self.next_output = 0
        self.changed = False
        self.first: JSONObject | None = None
        self.shown: list[JSONObject] = []
        self.totals: Usage = {}
        self._new_round()

    def _new_round(self) -> None:
        self.mapping: dict[int, int | None] = {}
        self.items: dict[int, JSONObject] = {}
        self.held: list[Event] = []
        self.client_calls = 0

    def _ours(self, item: object) -> bool:
        return (
            isinstance(item, dict)
            and item.get("type") == "function_call"
            and item.get("name") in self.names
        )

    # -- streamed --------------------------------------------------------------------------
    def feed(self, event: Event) -> list[bytes]:
        """What the client gets now of one upstream event."""
        data = event.data
        if not isinstance(data, dict):
            return [event.raw]
        kind = str(data.get("type") or event.name)
        number = data.get("sequence_number")
        if not self.rounds and not self.changed and isinstance(number, int):
            self.sequence = number  # the provider's numbering, as long as nothing changed
        if kind in CLOSING:
            self.held.append(event)
            return []
        if kind in OPENING:
            if self.first is None and isinstance(response := data.get("response"), dict):
                self.first = response
            if self.rounds:
                return []
        index = data.get("output_index")
        if isinstance(index, int):
            if kind == "response.output_item.added":
                item = data.get("item")
                ours = self._ours(item)
                if (
                    isinstance(item, dict)
                    and item.get("type") in ("function_call", "custom_tool_call")
                    and not ours
                ):
                    self.client_calls += 1
                self.mapping[index] = None if ours else self.next_output
                self.next_output += 0 if ours else 1
            if kind == "response.output_item.done" and isinstance(done := data.get("item"), dict):
                self.items[index] = done
                if self.mapping.get(index, index) is not None:
                    self.shown.append(done)
            shown = self.mapping.get(index, index)
            if shown is None:
                self.changed = True
                return []
            if shown != index:
                data = {**data, "output_index": shown}
        return [self._numbered(event, data)]

    def _numbered(self, event: Event, data: JSONObject) -> bytes:
        number = self.sequence
        self.sequence += 1
        if data is event.data and data.get("sequence_number") == number:
            return event.raw
        self.changed = True
        return encode(event.name or str(data.get("type")), {**data, "sequence_number": number})

    def calls(self) -> list[HistoryCall]:
        """The round's history calls, when the proxy can answer them and go on."""
        ours = [self.items[i] for i in sorted(self.items) if self._ours(self.items[i])]
        return answerable(ours, self.client_calls, _call)

    def continuation(self, request: Request, results: Answered) -> Request:
        kept = _sendable([self.items[i] for i in sorted(self.items)], request)
        outputs: list[JSONObject] = [
            {"type": "function_call_output", "call_id": c.id, "output": text} for c, text in results
        ]
        for event in self.held:
            if isinstance(event.data, dict):
                add_usage(self.totals, obj(obj(event.data.get("response")).get("usage")))
        self.rounds += 1
        self.changed = True
        self._new_round()
        return {**request, "input": [*input_items(request), *kept, *outputs]}

    def finish(self, *, cut: bool = False) -> list[bytes]:
        """The closing event (the first response's id, every item shown, usage summed)."""

        def rewrite(event: Event, data: JSONObject) -> bytes:
            response = dict(obj(data.get("response")))
            totals = dict(self.totals)
            add_usage(totals, obj(response.get("usage")))
            first = self.first or {}
            response.update(output=list(self.shown), usage=totals)
            for key in ("id", "created_at"):
                if key in first:
                    response[key] = first[key]
            return self._numbered(event, {**data, "response": response})

        return closing(self.held, self.changed, rewrite)

    # -- a whole JSON answer ----------------------------------------------------------------
    def json_ours(self, answer: JSONObject) -> bool:
        """Whether a JSON round calls a history tool at all."""
        return any(self._ours(i) for i in objects(answer.get("output")))

    def json_calls(self, answer: JSONObject) -> list[HistoryCall]:
        calls = [
            i
            for i in objects(answer.get("output"))
            if i.get("type") in ("function_call", "custom_tool_call")
        ]
        ours = [i for i in calls if self._ours(i)]
        return answerable(ours, len(calls) - len(ours), _call)

    def json_continuation(self, request: Request, answer: JSONObject, results: Answered) -> Request:
        kept = _sendable(objects(answer.get("output")), request)
        outputs: list[JSONObject] = [
            {"type": "function_call_output", "call_id": c.id, "output": text} for c, text in results
        ]
        return {**request, "input": [*input_items(request), *kept, *outputs]}

    def merge(self, answers: Sequence[JSONObject]) -> JSONObject:
        """The first response's id, the last's status, every item but the history calls,
        usage summed."""
        output = [i for a in answers for i in items(a.get("output")) if not self._ours(i)]
        totals: Usage = {}
        for one in answers:
            add_usage(totals, obj(one.get("usage")))
        last = answers[-1]
        return {
            **last,
            "id": answers[0].get("id"),
            "created_at": answers[0].get("created_at"),
            "output": output,
            "usage": totals,
        }
