"""Tool call ids between a framework and the graph: what an entry must hold to be stored,
and a render's graph ids mapped back to the framework's without repeating one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, cast

from graph import ChatMessage, call_id_text
from openprogram._errors import MalformedMessage

__all__ = ["CallPositions", "FrameworkIds", "call_counts", "call_ids", "check_entries", "text_ids"]


class FrameworkIds:
    """Maps a render's graph call ids back to the framework's, never to one already used in
    the same prompt (two calls the framework gave one id keep their graph ids).

    What each mapping used and assigned is logged in order (``used_log``,
    ``assigned_log``), so that a later render sharing a start with this one resumes from
    the state after it (:meth:`resumed`) instead of mapping it again."""

    def __init__(self, framework_ids: dict[str, str]) -> None:
        self.framework_ids = framework_ids
        self.used: set[str] = set()
        self.assigned: dict[str, str] = {}
        self.used_log: list[str] = []
        self.assigned_log: list[tuple[str, str]] = []

    @classmethod
    def resumed(
        cls, framework_ids: dict[str, str], used: list[str], assigned: list[tuple[str, str]]
    ) -> FrameworkIds:
        """The state after mapping the messages that used and assigned these, in order."""
        ids = cls(framework_ids)
        ids.used, ids.assigned = set(used), dict(assigned)
        ids.used_log, ids.assigned_log = used, assigned
        return ids

    def map(self, message: ChatMessage) -> ChatMessage:
        if message.get("role") == "tool":
            graph_id = str(message.get("tool_call_id"))
            out = self.assigned.get(graph_id, self.framework_ids.get(graph_id, graph_id))
            return message if out == graph_id else {**message, "tool_call_id": out}
        if not message.get("tool_calls"):
            return message
        calls = []
        for call in message["tool_calls"]:
            graph_id = call["id"]
            out = self.framework_ids.get(graph_id, graph_id)
            if out in self.used:
                out = graph_id
            self.used.add(out)
            self.assigned[graph_id] = out
            self.used_log.append(out)
            self.assigned_log.append((graph_id, out))
            calls.append(call if out == graph_id else {**call, "id": out})
        return {**message, "tool_calls": calls}


class _Checked(Protocol):
    """What :func:`check_entries` reads of an entry (an ``Entry`` is one)."""

    @property
    def message(self) -> ChatMessage: ...

    @property
    def label(self) -> str: ...


def check_entries(name: str, entries: Sequence[_Checked], start: int = 0) -> None:
    """Refuse, before anything is stored, a message the graph cannot hold as it is (from
    ``start``: those before it were checked when they were first stored)."""
    for index, entry in enumerate(entries[start:], start):
        message = entry.message
        where = f"{name} message {index} ({entry.label or message.get('role')})"
        role = message.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            raise MalformedMessage(f"{where}: role {role!r} is not system, user, assistant or tool")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise MalformedMessage(f"{where}: a tool result without the id of its call")
        for n, call in enumerate(message.get("tool_calls") or ()):
            call_id = call.get("id") if isinstance(call, dict) else None
            if not isinstance(call_id, str) or not call_id:
                raise MalformedMessage(f"{where}: tool call {n} has no id")
            function = call.get("function")
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise MalformedMessage(f"{where}: tool call {n} ({call_id!r}) has no name")


def text_ids(message: ChatMessage) -> ChatMessage:
    """``message`` with integer tool call ids (``id=0``, ``tool_call_id=7``) as their text,
    as the graph stores them: a framework's call and its result keep pairing, and a render
    maps them back to the same text."""
    calls = message.get("tool_calls")
    changed: dict[str, Any] = {}
    if (
        "tool_call_id" in message
        and call_id_text(message["tool_call_id"]) is not (message["tool_call_id"])
    ):
        changed["tool_call_id"] = call_id_text(message["tool_call_id"])
    if isinstance(calls, list) and any(
        isinstance(c, dict) and call_id_text(c.get("id")) is not c.get("id") for c in calls
    ):
        changed["tool_calls"] = [
            {**c, "id": call_id_text(c.get("id"))} if isinstance(c, dict) else c for c in calls
        ]
    return cast("ChatMessage", {**message, **changed}) if changed else message


def call_counts(message: ChatMessage) -> dict[str, int]:
    counts: dict[str, int] = {}
    for call in message.get("tool_calls") or ():
        counts[call["id"]] = counts.get(call["id"], 0) + 1
    return counts


def call_ids(message: ChatMessage) -> list[str]:
    if message.get("role") == "tool":
        return [str(message.get("tool_call_id"))]
    return [call["id"] for call in message.get("tool_calls") or ()]


class _Messaged(Protocol):
    @property
    def message(self) -> ChatMessage: ...


class CallPositions:
    """Where the calls and results are among a history's entries. The part a history shares
    with the last one read (by digest: the same messages) is not read again, so a framework
    that resends its history costs what it adds."""

    def __init__(self) -> None:
        self._digests: Sequence[str] = []
        self._positions: list[int] = []

    def among(self, entries: Sequence[_Messaged], digests: Sequence[str], end: int) -> list[int]:
        """The positions of the calls and results among the first ``end`` entries (whose
        digests are ``digests``), in order."""
        shared = min(len(self._digests), end)
        positions = self._positions
        if self._digests[:shared] != digests[:shared]:
            shared, positions = 0, []
        positions = [index for index in positions if index < shared]
        for index in range(shared, end):
            message = entries[index].message
            if message.get("tool_calls") or message.get("role") == "tool":
                positions.append(index)
        self._digests, self._positions = list(digests[:end]), positions
        return positions
