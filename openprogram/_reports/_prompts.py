"""The last prompt a session sent and the next one it would send, told apart.

The last prompt is what its render receipt recorded: its messages exactly as sent, read
back from the messages the receipt names (``context.sent_prompt``). A receipt written
before messages were kept can only be rendered again, and that render is shown only when
it still matches the receipt: after a rollback or a new compaction the same head renders
differently, and that render was never sent. The next prompt is a preview from the
session's head. The CLI's ``context`` and the MCP ``context`` tool both report
through :func:`context_report`, so they agree on which is which.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from context import (
    ContextEngine,
    MessageSource,
    Rendered,
    RenderReceipt,
    TokenCounter,
    render_receipt,
    sent_prompt,
)
from graph import ConversationGraph, Frame


@dataclass(frozen=True)
class Prompts:
    """The last prompt sent (its receipt; None before the first) and the next one."""

    last: RenderReceipt | None
    again: Rendered | None
    """The last prompt as sent (``exact``), else rendered again from its receipt when that
    render matches the receipt (the same tokens and messages); None when it cannot be."""
    next: Rendered
    exact: bool = False
    """``again`` is the prompt exactly as sent, not a render again."""


def prompts(graph: ConversationGraph, engine: ContextEngine, *, receipts: bool = True) -> Prompts:
    """The session's last prompt (from its receipt unless ``receipts`` is False, as for a
    what-if) and its next one, as previews: nothing is written."""
    receipt = engine.storage.last_receipt() if receipts and engine.storage else None
    if receipt is None:
        return Prompts(None, None, engine.preview())
    again: Rendered | None = sent_prompt(engine.storage, receipt) if engine.storage else None
    exact = again is not None
    if again is None:
        again = render_receipt(engine, receipt)
        if (again.tokens, len(again.messages)) != (receipt.tokens, receipt.messages):
            again = None
    frame = next_frame(graph, receipt.frame)
    upcoming = engine.preview(head=next_head(graph, frame), frame=frame)
    return Prompts(receipt, again, upcoming, exact)


def next_frame(graph: ConversationGraph, frame: str | None) -> str | None:
    """Where the next prompt renders: the last prompt's frame while its function runs, the
    top level once it has finished."""
    if frame is None or frame not in graph or graph.get(frame).finish is not None:
        return None
    return frame


def next_head(graph: ConversationGraph, frame: str | None) -> str | None:
    """Where the next prompt of ``frame`` renders from: its newest node."""
    if frame is None:
        return graph.default_head()
    return graph.head_of(Frame(frame))


PARTS = (
    "system messages",
    "tool schemas",
    "user messages",
    "assistant messages",
    "assistant tool calls",
    "tool outputs",
    "summaries (layers)",
    "placeholders",
)
"""The parts a prompt's tokens are told by, here, in ``context --json`` and in the viewer
(in the viewer chart's order, bottom first)."""


def part_of(message: Mapping[str, object], source: MessageSource | None = None) -> str:
    """Which of :data:`PARTS` a message is, from the source its render gave it (a layer's
    message is a summary; a node shown cut down, cleared or moved out, or a note for
    dropped rounds, is a placeholder), else by its role (a receipt written before sources
    were kept)."""
    role = message.get("role")
    if role == "system":
        return "system messages"
    if source is not None and not source.current:
        if source.variant == "layer":
            return "summaries (layers)"
        if source.placeholder:
            return "placeholders"
    if role == "tool":
        return "tool outputs"
    if role == "assistant":
        return "assistant tool calls" if message.get("tool_calls") else "assistant messages"
    return "user messages"


def sources_of(rendered: Rendered) -> list[MessageSource | None]:
    """Each message's source (None for every message of a prompt whose receipt kept none)."""
    if len(rendered.sources) == len(rendered.messages):
        return list(rendered.sources)
    return [None] * len(rendered.messages)


def parts(rendered: Rendered, counter: TokenCounter) -> collections.Counter[str]:
    """A prompt's tokens by part, the tool schemas included (what the messages leave)."""
    found: collections.Counter[str] = collections.Counter()
    for message, source in zip(rendered.messages, sources_of(rendered), strict=True):
        found[part_of(message, source)] += counter.count_message(message)
    schema = rendered.tokens - sum(found.values())
    if schema > 0:
        found["tool schemas"] += schema
    return found


def saved_by_tier(rendered: Rendered) -> dict[str, int]:
    """Tokens each tier took out of this prompt (tiers that saved nothing left out)."""
    saved: collections.Counter[str] = collections.Counter()
    for action in rendered.actions:
        saved[action.tier] += action.tokens_before - action.tokens_after
    return {tier: tokens for tier, tokens in saved.most_common() if tokens > 0}


def _prompt(rendered: Rendered, counter: TokenCounter) -> dict[str, Any]:
    return {
        "budget": rendered.budget,
        "tokens": rendered.tokens,
        "messages": len(rendered.messages),
        "message_tokens": [counter.count_message(m) for m in rendered.messages],
        "parts": dict(parts(rendered, counter).most_common()),
        "saved_by_tier": saved_by_tier(rendered),
        "actions": [msgspec.to_builtins(a) for a in rendered.actions],
    }


def context_report(
    graph: ConversationGraph, found: Prompts, counter: TokenCounter
) -> dict[str, Any]:
    """Both prompts as JSON values: ``last_sent`` from the receipt (with ``shown``, the
    prompt as sent when ``exact``, its messages in ``sent``, else its render again when
    that still matches) and ``next``; ``budget``, ``tokens`` and
    ``messages`` at the top are the last sent prompt's, else the next one's."""
    receipt = found.last
    last: dict[str, Any] | None = None
    if receipt is not None:
        last = {
            "receipt": receipt.id,
            "at": receipt.at,
            "frame": receipt.frame,
            "budget": receipt.budget,
            "tokens": receipt.tokens,
            "messages": receipt.messages,
            "exact": found.exact,
            "shown": None if found.again is None else _prompt(found.again, counter),
        }
    if last is not None and found.exact and found.again is not None:
        last["sent"] = found.again.messages
    upcoming = _prompt(found.next, counter)
    top = last or upcoming
    return {
        "session": graph.session,
        "budget": top["budget"],
        "tokens": top["tokens"],
        "messages": top["messages"],
        "last_sent": last,
        "next": upcoming,
    }
