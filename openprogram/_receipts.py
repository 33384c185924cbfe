"""What a session sent: a render receipt per prompt, and the prompt rendered again from it.

A receipt is written in its render's transaction (a commit hook), so it lands with the
layers and tier state it was rendered under, or not at all; a second process, the CLI and
the notebooks read it to see what the agent sent.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from context import (
    Committed,
    ContextEngine,
    Rendered,
    RenderReceipt,
    canonical_message,
    message_digest,
    render_receipt,
    sent_prompt,
    tools_digest,
)
from graph import new_id

if TYPE_CHECKING:
    from context import ContextStorage
    from graph import ConversationGraph


class Receipts:
    """The render receipts of :class:`~openprogram.Session`."""

    if TYPE_CHECKING:
        graph: ConversationGraph
        engine: ContextEngine
        _storage: ContextStorage

        @property
        def id(self) -> str: ...

    def _receipt(self, engine: ContextEngine, committed: Committed) -> None:
        """Keep what a render decided to send, in its commit's transaction: a receipt lands
        with the layers and tier state it was rendered under, or not at all."""
        if engine.storage is None:
            return
        request, rendered = committed.request, committed.rendered
        sent = [canonical_message(message) for message in rendered.messages]
        digests = tuple(message_digest(text) for text in sent)
        receipt = RenderReceipt(
            id=new_id(),
            session=self.id,
            seq=self.graph.last_seq,
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
        )
        tools = list(request.tools)
        engine.storage.save_receipt(receipt, tools, dict(zip(digests, sent, strict=True)))

    def receipt(self) -> RenderReceipt | None:
        """The last prompt this session sent, as a receipt (None: none sent yet)."""
        return self._storage.last_receipt()

    def last_prompt(self) -> Rendered | None:
        """The prompt this session sent last, exactly as sent (a :class:`~context.SentPrompt`
        read back from its receipt's stored messages); for a receipt written before
        messages were kept, rendered again from it (its head, frame, tools and effective
        budget), writing nothing. None before the first call. ``session.engine.preview()``
        shows the next one."""
        receipt = self.receipt()
        if receipt is None:
            return None
        return sent_prompt(self._storage, receipt) or render_receipt(self.engine, receipt)
