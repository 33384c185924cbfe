"""``Rendered``: one render's prompt, its token count and what the cascade did for it."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from graph import ChatMessage, ToolSchema

from .._store._receipt import RenderReceipt
from .._store._records import CompactionRecord
from .._store._source import MessageSource
from .._store._storage import ContextStorage


class Rendered(msgspec.Struct, frozen=True):
    """One render: provider-ready messages and what it took to get there."""

    messages: list[ChatMessage]
    tokens: int
    budget: int
    actions: list[Any]
    records: list[CompactionRecord]
    context_management: dict[str, Any] | None = None
    preview: bool = False
    floor: int = 0
    """Tokens no tier can take away: the tool schemas and the system prompt as sent."""
    id: str = ""
    """The render's id: its records and receipt carry it."""
    sources: list[MessageSource] = msgspec.field(default_factory=list)
    """Where each message came from (node, variant, layer, tier), in order; empty for a
    prompt read back from a receipt written before sources were kept."""
    summary: str = ""
    """How it got the summaries it needed: ``adopted`` (computed ahead, done), ``waited``,
    ``went without`` (``Policy.summary_wait = "never"``), "" (it needed none)."""

    @property
    def fits(self) -> bool:
        return self.tokens <= self.budget

    @property
    def floor_fits(self) -> bool:
        """Whether the tool schemas and system prompt leave room under the budget."""
        return self.floor <= self.budget

    def _repr_html_(self) -> str:
        from html import escape

        rows = []
        for message in self.messages:
            content = message.get("content")
            text = content if isinstance(content, str) else str(content or "")
            calls = message.get("tool_calls") or []
            if calls:
                text += "\n" + ", ".join(f"→ {c['function']['name']}" for c in calls)
            short = text if len(text) <= 400 else f"{text[:400]} … ({len(text):,} characters)"
            rows.append(
                f"<tr><td style='vertical-align:top'><b>{escape(message['role'])}</b></td>"
                f"<td style='text-align:left'><pre style='margin:0;white-space:pre-wrap'>"
                f"{escape(short)}</pre></td></tr>"
            )
        tiers = ", ".join(dict.fromkeys(a.tier for a in self.actions)) or "none"
        head = (
            f"<b>{len(self.messages)} messages, {self.tokens:,} of {self.budget:,} tokens</b>"
            f" — tiers: {escape(tiers)}"
        )
        return f"<div>{head}<table>{''.join(rows)}</table></div>"


class SentPrompt(Rendered, frozen=True):
    """The prompt a receipt says was sent, read back exactly: its messages, its token
    total, its effective budget and its tool schemas (nothing was rendered for it)."""

    tools: list[ToolSchema] = msgspec.field(default_factory=list)
    receipt: str = ""
    """The receipt read back (``id`` is the render it was written for)."""


def sent_prompt(storage: ContextStorage, receipt: RenderReceipt) -> SentPrompt | None:
    """The prompt ``receipt`` was written for, exactly as sent; None when the receipt
    predates message digests or a message is not stored (then only a render again, see
    :func:`render_receipt`, can show it)."""
    if not receipt.message_digests:
        return None
    found = storage.messages(receipt.message_digests)
    if len(found) != len(set(receipt.message_digests)):
        return None
    messages = [json.loads(found[digest]) for digest in receipt.message_digests]
    return SentPrompt(
        messages,
        receipt.tokens,
        receipt.budget,
        [],
        [],
        preview=True,
        tools=storage.tools(receipt.tools_digest) or [],
        receipt=receipt.id,
        id=receipt.render or receipt.id,
        sources=[
            msgspec.structs.replace(source, render=receipt.render or receipt.id)
            for source in receipt.sources
        ],
    )
