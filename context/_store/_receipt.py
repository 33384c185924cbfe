"""``RenderReceipt``: what one LLM call was sent, kept so that others can see it again.

The runtime stores a receipt for every prompt it sends (``ContextStorage.save_receipt``):
the head and frame it rendered, a digest of the tool schemas (the schemas themselves are
kept once per digest) and their tokens, the effective budget after any overflow squeeze,
and the token total. A second process, the CLI and the notebooks render from the last
receipt by default, so they show the prompt the agent sent last, not one under another
budget or without its tools.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import msgspec

from graph import ChatMessage, ToolSchema

from ._source import MessageSource


class ProviderUsage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the provider reported for the call a receipt sent (the proxy and ``Session``'s
    loop keep it, ``ContextStorage.put_usage``)."""

    input_tokens: int
    """Input tokens in all, cached or not."""
    cached_input_tokens: int = 0
    """Of those, read from the provider's prompt cache."""
    cache_write_tokens: int = 0
    """Of those, written to the provider's prompt cache."""
    output_tokens: int = 0

    @property
    def uncached_input_tokens(self) -> int:
        return self.input_tokens - self.cached_input_tokens


class RenderReceipt(msgspec.Struct, frozen=True, kw_only=True):
    """One sent prompt, as rendered."""

    id: str
    session: str
    seq: int
    """The session's last seq when it was rendered."""
    head: str | None
    frame: str | None
    tools_digest: str
    tool_tokens: int
    budget: int
    """The effective budget: the configured one after any overflow squeeze."""
    configured_budget: int
    tokens: int
    messages: int
    epoch: int = 0
    """The configuration epoch it was rendered under (see ``ContextStorage.configure``)."""
    at: str = ""
    anchor: list[float] = msgspec.field(default_factory=list)
    """The usage anchor's state then (``UsageAnchor.state``): how the provider's counts
    mapped onto ours, which the cascade's budget went through."""
    floor_tokens: int = 0
    """The tool schemas and the system prompt as sent (``Rendered.floor``): over
    ``budget``, no render could fit (the engine warned with ``BudgetFloorWarning``)."""
    message_digests: tuple[str, ...] = ()
    """The messages sent, in order, each by :func:`message_digest`: the messages
    themselves are kept once per session and digest (``ContextStorage.messages``), so the
    prompt as sent is read back, not rendered again. Empty in receipts written before."""
    render: str | None = None
    """The render it was written for: the id its ``Rendered`` and records carry (receipts
    written since renders had ids use it as their own id too)."""
    sources: tuple[MessageSource, ...] = ()
    """Where each sent message came from (``Rendered.sources``, kept without their
    ``render``, which is the receipt's own); empty in receipts written before."""
    records: tuple[str, ...] = ()
    """The ids of the compaction records its render made."""
    usage: ProviderUsage | None = None
    """What the provider reported for the call (kept beside the receipt once the answer
    came, and read back with it)."""
    summary: str = ""
    """How its render got the summaries it needed (``Rendered.summary``): ``adopted``,
    ``waited``, ``went without``, or "" when it needed none."""


_canonical = json.JSONEncoder(
    sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
)
"""One encoder for every message (``json.dumps`` with options builds one per call)."""


def canonical_message(message: ChatMessage) -> str:
    """A sent message as canonical JSON (sorted keys): the form it is stored and digested in."""
    return _canonical.encode(message)


def message_digest(text: str) -> str:
    """The digest a receipt names a sent message by (of its canonical JSON)."""
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def tools_digest(tools: Sequence[ToolSchema]) -> str:
    """A short, stable digest of tool schemas (key order does not matter)."""
    text = json.dumps(list(tools), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]
