"""What the three splicers (``_splice_anthropic``, ``_splice_chat``, ``_splice_responses``)
share: usage summed over rounds, the history calls a round leaves to the proxy, and the
closing events each holds until it is known whether the proxy continues."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from openprogram._json import JSONObject
from openprogram.proxy._bodies import Usage
from openprogram.proxy._history_tools import HistoryCall
from openprogram.proxy._sse import Event

__all__ = ["Answered", "add_usage", "answerable", "closing"]

Call = TypeVar("Call")
Answered = list[tuple[HistoryCall, str]]
"""The history calls of a round, each with the text that answers it."""


def add_usage(totals: Usage, usage: JSONObject) -> None:
    """Adds one round's usage into ``totals``: whole numbers summed, nested counts alike."""
    for key, value in usage.items():
        if isinstance(value, int):
            had = totals.get(key, 0)
            totals[key] = (had if isinstance(had, int) else 0) + value
        elif isinstance(value, dict):
            inner = totals.setdefault(key, {})
            if isinstance(inner, dict):
                add_usage(inner, value)


def answerable(
    ours: list[Call], others: int, make: Callable[[Call], HistoryCall]
) -> list[HistoryCall]:
    """The round's history calls, if the proxy can answer them and go on: none when the
    round called none, or the client has ``others`` calls of its own to answer."""
    if not ours or others:
        return []
    return [make(call) for call in ours]


def closing(
    held: Iterable[Event],
    changed: bool,
    rewrite: Callable[[Event, JSONObject], bytes | None],
) -> list[bytes]:
    """The held closing events as the client gets them: byte for byte while nothing was
    changed; else each with data through ``rewrite`` (``None``: it passes as it came)."""
    if not changed:
        return [event.raw for event in held]
    out = []
    for event in held:
        written = rewrite(event, event.data) if isinstance(event.data, dict) else None
        out.append(event.raw if written is None else written)
    return out
