"""Integrity: every prompt we return is one a provider accepts.

Checked after every tier: each tool result directly follows the assistant message that
called it, every call has a result, and (for providers that require it) the first
non-system message is a user message and same-role neighbours are merged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from graph import ChatMessage

from ._passes import RepairPass, RolesPass, UniquePass


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
    repair = RepairPass()
    repair.run(messages)
    return repair.fixed, repair.notes


def provider_roles(messages: list[ChatMessage]) -> tuple[list[ChatMessage], list[str]]:
    """Merge same-role neighbours (never across tool calls) and start with a user turn."""
    result, notes, _ = grouped_roles(messages)
    return result, notes


def grouped_roles(
    messages: list[ChatMessage],
) -> tuple[list[ChatMessage], list[str], list[list[int]]]:
    """:func:`provider_roles`, with the indexes of the messages each result was made of
    (empty: the user turn it inserted), so a message's source follows it."""
    return RolesPass().run(messages)


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
    unique = UniquePass()
    unique.run(messages)
    return unique.fixed, unique.notes
