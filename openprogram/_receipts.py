"""What a session sent: a render receipt per prompt, and the prompt rendered again from it.

A receipt is written in its render's transaction (a commit hook), so it lands with the
layers and tier state it was rendered under, or not at all; a second process, the CLI and
the notebooks read it to see what the agent sent.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from context import (
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

    def _receipt(self, engine: ContextEngine, rendered: Rendered) -> None:
        """Keep what a render decided to send, in its commit's transaction: a receipt lands
        with the layers and tier state it was rendered under, or not at all."""
        if engine.storage is None:
            return
        head, frame = engine.rendering
        sent = [canonical_message(message) for message in rendered.messages]
        digests = tuple(message_digest(text) for text in sent)
        receipt = RenderReceipt(
            id=new_id(),
            session=self.id,
            seq=self.graph.last_seq,
            head=head,
            frame=frame,
            tools_digest=tools_digest(engine.tools),
            tool_tokens=engine.tool_tokens,
            budget=max(1, int(engine.budget * engine.squeeze)),
            configured_budget=engine.budget,
            tokens=rendered.tokens,
            messages=len(rendered.messages),
            epoch=self._storage.epoch(),
            at=datetime.now(UTC).isoformat(timespec="milliseconds"),
            anchor=engine.anchor.state(),
            floor_tokens=rendered.floor,
            message_digests=digests,
        )
        engine.storage.save_receipt(receipt, engine.tools, dict(zip(digests, sent, strict=True)))

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
