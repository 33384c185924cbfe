"""Where one policy keeps what another loses: identifier uses one prompt held and the other's
did not, each with the cause read off the losing prompt.

For each turn, the recall candidates (identifiers the agent wrote that already stood in its
history) that ``kept``'s prompt held and ``lost``'s did not; the cause is what ``lost``'s
prompt showed in place of the newest history message holding the identifier: a tool output
offloaded (by its age), cut in the middle, cleared, superseded or gone, or another message gone.
How a tool output was shown is read from the source its render gave it (its stored variant),
never from the placeholder's wording.
An assistant message says where in it the identifier stood: its text, a value of one of its
tool calls' arguments, or only an argument's name (``old_string``): a name the tool's schema
gives, which a real request sends beside the messages and the bench's prompts leave out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from context import MessageSource
from openprogram.bench._metrics import (
    Message,
    Turn,
    argument_parts,
    content_text,
    identifiers,
    message_text,
    messages_text,
)
from openprogram.bench._replay import MessageCounter, Trace, run_policy

_SHOWN_AS: dict[str, str] = {
    "cleared": "tool output cleared",
    "edit-cleared": "tool output cleared",
    "superseded": "tool output superseded",
}
"""The cause a shown tool output's variant gives (an offload names its age; the rest, a
head-and-tail cut)."""


def _cause(
    ident: str,
    history: Sequence[Message],
    prompt: Sequence[Message],
    sources: Sequence[MessageSource] = (),
) -> str:
    source, age = None, 0
    for age, message in enumerate(reversed(history)):  # noqa: B007 - the age is the point
        if ident in message_text(message):
            source = message
            break
    if source is None:
        return "not in the history"
    role = source.get("role")
    if role == "assistant":
        return f"assistant {_where(ident, source)} collapsed, compacted or dropped"
    if role != "tool":
        return f"{role} message collapsed, compacted or dropped"
    call_id = source.get("tool_call_id")
    shown = next(
        (
            index
            for index, m in enumerate(prompt)
            if m.get("role") == "tool" and m.get("tool_call_id") == call_id
        ),
        None,
    )
    if shown is None:
        return "tool output collapsed, compacted or dropped"
    variant = sources[shown].variant if shown < len(sources) else None
    if variant == "offloaded":
        when = "newest round" if age <= 2 else "3-10 messages old" if age <= 10 else "older"
        return f"tool output offloaded ({when})"
    return _SHOWN_AS.get(str(variant), "tool output cut in the middle")


def _where(ident: str, message: Message) -> str:
    """Which part of an assistant message names ``ident``: its text, a tool call's argument
    value, or only an argument's name."""
    if ident in content_text(message.get("content")):
        return "text"
    names: list[str] = []
    for call in message.get("tool_calls") or ():
        called, values = argument_parts((call.get("function") or {}).get("arguments"))
        if any(ident in value for value in values):
            return "tool-call argument"
        names.extend(called)
    if any(ident in name for name in names):
        return "tool-call argument name"
    return "tool call"


def identifier_losses(
    trace: Trace,
    lost: str,
    kept: str,
    budget: int,
    count: MessageCounter,
    overrides: dict[str, Any] | None = None,
) -> Counter[str]:
    """Identifier uses ``kept``'s prompts held and ``lost``'s did not, counted by cause
    (``overrides``: policy fields changed, as ``bench --set`` gives them)."""
    held: list[str] = []
    turns: list[Turn] = []
    run_policy(
        trace,
        kept,
        budget,
        count,
        on_turn=lambda t, _: held.append(messages_text(t.prompt)),
        overrides=overrides,
    )
    run_policy(
        trace, lost, budget, count, on_turn=lambda t, _: turns.append(t), overrides=overrides
    )
    causes: Counter[str] = Counter()
    seen: set[str] = set()
    scanned = 0
    for turn, other in zip(turns, held, strict=True):
        for message in turn.history[scanned:]:
            seen |= identifiers(message_text(message))
        scanned = len(turn.history)
        ours = messages_text(turn.prompt)
        for ident in identifiers(message_text(turn.assistant)) & seen:
            if ident in other and ident not in ours:
                causes[_cause(ident, turn.history, turn.prompt, turn.sources)] += 1
    return causes
