"""What a session sent: a render receipt per prompt, and the prompt rendered again from it.

A receipt is written in its render's transaction (a commit hook), so it lands with the
layers and tier state it was rendered under, or not at all; a second process, the CLI and
the notebooks read it to see what the agent sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import msgspec

from context import (
    Committed,
    ContextEngine,
    ContextStorage,
    Rendered,
    RenderReceipt,
    canonical_message,
    message_digest,
    render_receipt,
    sent_prompt,
    tools_digest,
)
from graph import ChatMessage, new_id


class Receipts:
    """The render receipts of one session (``session``), kept in its context ``storage``;
    ``seq`` reads the session's graph's last seq when a receipt is written."""

    def __init__(self, storage: ContextStorage, session: str, seq: Callable[[], int]) -> None:
        self._storage = storage
        self._session = session
        self._seq = seq
        self._sent: dict[int, tuple[ChatMessage, str, str]] = {}
        """The last receipt's messages, by identity, with their canonical JSON and digest:
        a render hands back the very message objects of the last one for what did not
        change (the engine never changes a message it rendered), so a receipt encodes only
        what is new instead of the whole history each time."""

    def write(self, engine: ContextEngine, committed: Committed) -> None:
        """Keep what a render decided to send, in its commit's transaction: a receipt lands
        with the layers and tier state it was rendered under, or not at all."""
        if engine.storage is None:
            return
        request, rendered = committed.request, committed.rendered
        sent, digests = self._encoded(rendered.messages)
        receipt = RenderReceipt(
            id=rendered.id or new_id(),
            session=self._session,
            seq=self._seq(),
            head=request.head,
            frame=request.frame,
            tools_digest=tools_digest(request.tools),
            tool_tokens=request.tool_tokens,
            budget=max(1, int(request.budget * request.squeeze)),
            configured_budget=request.budget,
            tokens=rendered.tokens,
            messages=len(rendered.messages),
            epoch=self._storage.epoch(),
            at=datetime.now(UTC).isoformat(timespec="milliseconds"),
            anchor=request.anchor.state(),
            floor_tokens=rendered.floor,
            message_digests=digests,
            render=rendered.id or None,
            sources=tuple(msgspec.structs.replace(s, render="") for s in rendered.sources),
            records=tuple(record.id for record in rendered.records),
            summary=rendered.summary,
        )
        tools = list(request.tools)
        engine.storage.save_receipt(receipt, tools, dict(zip(digests, sent, strict=True)))

    def _encoded(self, messages: Sequence[ChatMessage]) -> tuple[list[str], tuple[str, ...]]:
        """Each message's canonical JSON and digest (kept for the next receipt)."""
        known, kept = self._sent, {}
        for message in messages:
            found = known.get(id(message))
            if found is None or found[0] is not message:
                text = canonical_message(message)
                found = (message, text, message_digest(text))
            kept[id(message)] = found
        self._sent = kept
        return [kept[id(m)][1] for m in messages], tuple(kept[id(m)][2] for m in messages)

    def last(self) -> RenderReceipt | None:
        """The receipt of the last prompt sent (None: none sent yet)."""
        return self._storage.last_receipt()

    def last_prompt(self, engine: ContextEngine) -> Rendered | None:
        """The last prompt as sent, read back from its receipt's stored messages; for a
        receipt written before messages were kept, rendered again by ``engine``."""
        receipt = self.last()
        if receipt is None:
            return None
        return sent_prompt(self._storage, receipt) or render_receipt(engine, receipt)
