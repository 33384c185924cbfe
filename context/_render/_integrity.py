"""Integrity: every prompt we return is one a provider accepts.

Checked after every tier: each tool result directly follows the assistant message that
called it, every call has a result, and (for providers that require it) the first
non-system message is a user message and same-role neighbours are merged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from graph import ChatMessage, text_of


def tool_pair_problems(
    messages: Sequence[Mapping[str, Any]], *, unique_ids: bool = True
) -> list[str]:
    """Problems with tool-call pairing, in words; empty when the messages are valid.

    Providers reject a result without its call and a call without its result, and they expect
    the results of one assistant's calls directly after it, before the next non-tool message.
    ``unique_ids=False`` tolerates a call id used again later (renders rename those last).

    >>> tool_pair_problems([{"role": "tool", "tool_call_id": "x", "content": "?"}])
    ["message 0: tool result 'x' has no earlier call"]
    """
    problems: list[str] = []
    earlier_calls: set[Any] = set()
    open_calls: dict[Any, str] = {}
    answered: set[Any] = set()
    block_start = -1

    def close_block(before: str) -> None:
        for call_id, name in open_calls.items():
            problems.append(
                f"message {block_start}: tool call {call_id!r} ({name}) has no result {before}"
            )
        open_calls.clear()
        answered.clear()

    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id in open_calls:
                del open_calls[call_id]
                answered.add(call_id)
            elif call_id in answered:
                problems.append(f"message {index}: second result for tool call {call_id!r}")
            elif call_id in earlier_calls:
                problems.append(
                    f"message {index}: tool result {call_id!r} is separated from its call "
                    "by a non-tool message"
                )
            else:
                problems.append(f"message {index}: tool result {call_id!r} has no earlier call")
            continue
        close_block(f"before message {index}")
        calls = (message.get("tool_calls") or ()) if role == "assistant" else ()
        block_start = index
        for call in calls:
            call_id = call.get("id")
            if call_id in open_calls or (unique_ids and call_id in earlier_calls):
                problems.append(f"message {index}: duplicate tool call id {call_id!r}")
            name = str((call.get("function") or {}).get("name") or "?")
            open_calls[call_id] = name
            earlier_calls.add(call_id)
    close_block("at the end")
    return problems


def repair_tool_pairs(messages: list[ChatMessage]) -> tuple[list[ChatMessage], list[str]]:
    """Drop orphaned results, add a placeholder result for a call without one.

    >>> fixed, notes = repair_tool_pairs([
    ...     {"role": "tool", "tool_call_id": "x", "content": "orphan"},
    ...     {"role": "assistant", "content": None, "tool_calls": [
    ...         {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    ... ])
    >>> [m["role"] for m in fixed], len(notes)
    (['assistant', 'tool'], 2)
    """
    fixed: list[ChatMessage] = []
    notes: list[str] = []
    open_calls: list[str] = []

    def close() -> None:
        for call_id in open_calls:
            fixed.append(
                {"role": "tool", "tool_call_id": call_id, "content": "[no result was recorded]"}
            )
            notes.append(f"added a placeholder result for call {call_id!r}")
        open_calls.clear()

    for message in messages:
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if call_id in open_calls:
                open_calls.remove(call_id)
                fixed.append(message)
            else:
                notes.append(f"dropped orphaned result {call_id!r}")
            continue
        close()
        fixed.append(message)
        if message.get("role") == "assistant":
            open_calls.extend(c.get("id") for c in message.get("tool_calls") or ())
    close()
    return fixed, notes


def _join(a: Any, b: Any) -> Any:
    if isinstance(a, list) or isinstance(b, list):
        parts_a = a if isinstance(a, list) else [{"type": "text", "text": a or ""}]
        parts_b = b if isinstance(b, list) else [{"type": "text", "text": b or ""}]
        return [*parts_a, *parts_b]
    return "\n\n".join(t for t in (text_of(a), text_of(b)) if t)


def provider_roles(messages: list[ChatMessage]) -> tuple[list[ChatMessage], list[str]]:
    """Merge same-role neighbours (never across tool calls) and start with a user turn."""
    result, notes, _ = grouped_roles(messages)
    return result, notes


def grouped_roles(
    messages: list[ChatMessage],
) -> tuple[list[ChatMessage], list[str], list[list[int]]]:
    """:func:`provider_roles`, with the indexes of the messages each result was made of
    (empty: the user turn it inserted), so a message's source follows it."""
    notes: list[str] = []
    result: list[ChatMessage] = []
    groups: list[list[int]] = []
    for index, message in enumerate(messages):
        previous = result[-1] if result else None
        role = message.get("role")
        if (
            previous is not None
            and role in ("user", "assistant")
            and previous.get("role") == role
            and not previous.get("tool_calls")
        ):
            merged: ChatMessage = {
                **previous,
                "content": _join(previous.get("content"), message.get("content")),
            }
            if message.get("tool_calls"):
                merged["tool_calls"] = message["tool_calls"]
            result[-1] = merged
            groups[-1].append(index)
            notes.append(f"merged consecutive {role} messages")
            continue
        result.append(message)
        groups.append([index])
    first = next((i for i, m in enumerate(result) if m.get("role") != "system"), None)
    if first is not None and result[first].get("role") != "user":
        result.insert(first, {"role": "user", "content": "(continuing the conversation)"})
        groups.insert(first, [])
        notes.append("inserted a user turn before the first assistant message")
    return result, notes, groups


def unique_call_ids(messages: list[ChatMessage]) -> tuple[list[ChatMessage], list[str]]:
    """Rename a tool-call id used again by a later call (``id~2``, ``id~3``…), with its result.

    A graph accepts an id again once its first call is answered; providers want every id in
    a prompt to be unique. The renaming depends only on the prompt, so it is byte-stable.

    >>> call = {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    >>> fixed, notes = unique_call_ids([
    ...     {"role": "assistant", "content": None, "tool_calls": [call]},
    ...     {"role": "tool", "tool_call_id": "a", "content": "1"},
    ...     {"role": "assistant", "content": None, "tool_calls": [call]},
    ...     {"role": "tool", "tool_call_id": "a", "content": "2"},
    ... ])
    >>> [m.get("tool_call_id") or m["tool_calls"][0]["id"] for m in fixed]
    ['a', 'a', 'a~2', 'a~2']
    """
    seen: set[str] = set()
    renamed: dict[str, str] = {}
    fixed: list[ChatMessage] = []
    notes: list[str] = []
    for message in messages:
        calls = message.get("tool_calls")
        if message.get("role") == "assistant" and calls:
            renamed = {}
            new_calls = []
            for call in calls:
                call_id = call.get("id")
                if call_id in seen:
                    n = 2
                    while f"{call_id}~{n}" in seen:
                        n += 1
                    renamed[call_id] = f"{call_id}~{n}"
                    notes.append(f"renamed a repeated call id {call_id!r}")
                    call = {**call, "id": renamed[call_id]}
                seen.add(call["id"])
                new_calls.append(call)
            fixed.append({**message, "tool_calls": new_calls} if renamed else message)
            continue
        if message.get("role") == "tool" and message.get("tool_call_id") in renamed:
            message = {**message, "tool_call_id": renamed[message["tool_call_id"]]}
        fixed.append(message)
    return fixed, notes
