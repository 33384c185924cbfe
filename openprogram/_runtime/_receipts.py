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
    MessageSource,
    Rendered,
    RenderReceipt,
    canonical_message,
    message_digest,
    render_receipt,
    same_prefix,
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
        self._sent: tuple[list[ChatMessage], list[str], list[str]] = ([], [], [])
        """The last receipt's messages with their canonical JSON and digests: a render
        hands back the very message objects of the last one for what did not change (the
        engine never changes a message it rendered), so a receipt encodes only what is
        new instead of the whole history each time."""

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
            epoch=engine.epoch,
            at=datetime.now(UTC).isoformat(timespec="milliseconds"),
            anchor=request.anchor.state(),
            floor_tokens=rendered.floor,
            message_digests=digests,
            render=rendered.id or None,
            sources=_bare(committed),
            records=tuple(record.id for record in rendered.records),
            summary=rendered.summary,
        )
        tools = list(request.tools)
        sent_by_digest = dict(zip(digests, sent, strict=True))
        engine.storage.save_receipt(receipt, tools, sent_by_digest, atomic=False)

    def _encoded(self, messages: Sequence[ChatMessage]) -> tuple[list[str], tuple[str, ...]]:
        """Each message's canonical JSON and digest (kept for the next receipt): those of
        the messages the last receipt started with are taken as they are, found in C, and
        any other message it held is looked up by identity."""
        last, last_texts, last_digests = self._sent
        shared = same_prefix(last, messages)
        texts, digests = last_texts[:shared], last_digests[:shared]
        if shared < len(messages):
            at = dict(zip(map(id, last), range(len(last)), strict=True))
            for message in messages[shared:]:
                index = at.get(id(message))
                if index is not None and last[index] is message:
                    texts.append(last_texts[index])
                    digests.append(last_digests[index])
                else:
                    text = canonical_message(message)
                    texts.append(text)
                    digests.append(message_digest(text))
        self._sent = (list(messages), texts, digests)
        return texts, tuple(digests)

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


def _bare(committed: Committed) -> tuple[MessageSource, ...]:
    """The render's sources as a receipt keeps them: with no render named."""
    if committed.sources is not None:
        return tuple(committed.sources)
    return tuple(msgspec.structs.replace(s, render="") for s in committed.rendered.sources)
