"""What the viewer reads without a graph loaded, and the shapes its pages take: a session
row, a call, a prompt; the compaction records each call made, a sent prompt's tokens by
part, and the text a node holds (what search looks in)."""

from __future__ import annotations

import collections
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from context import CompactionRecord, ContextStorage, RenderReceipt, TierName, TokenCounter
from graph import Node, text_of
from openprogram._reports._prompts import PARTS, part_of
from openprogram._view._provenance import PromptRow

DRAWN: tuple[TierName, ...] = ("collapse", "compact", "snip", "microcompact", "emergency")
"""The tiers whose records the timeline marks (a decision that rewrote the prompt)."""
FREED = "the prompt before the call's compactions, less what was sent"
"""What "freed" on the timeline means (a layer's "tokens saved" is ``_views.SAVED``)."""
KINDS = PARTS
"""The parts a prompt's tokens are stacked by, in the chart's order (bottom first): those
``openprogram context --json`` reports."""
KEPT = 200_000
"""Sent messages whose part and tokens a viewer keeps."""


def node_text(node: Node) -> str:
    """All the text a node holds: its message, a function's input and output, a tool's
    arguments and result."""
    payload: Any = node.payload
    if node.kind == "dialogue":
        return text_of(payload.content)
    if node.kind == "tool":
        result = text_of(node.result.content) if node.result is not None else ""
        return f"{payload.name}({payload.arguments})\n{result}"
    finish = node.finish
    out = "" if finish is None else str(finish.output if finish.error is None else finish.error)
    return f"{payload.name}({payload.input})\n{out}"


def records_by_call(
    receipts: Sequence[RenderReceipt], records: Sequence[CompactionRecord]
) -> dict[int, list[CompactionRecord]]:
    """The compactions each call's render made: a record names its render, whose receipt
    is the call's. One whose render sent nothing (``compact`` by hand) goes with the next
    call, the first to send what it decided (none yet: not drawn), as does a record
    written before records named their render (by time: the clock it was stamped with)."""
    found: dict[int, list[CompactionRecord]] = collections.defaultdict(list)
    number = {r.render or r.id: i for i, r in enumerate(receipts)}
    marks = [r.at for r in receipts]
    call = 0
    for record in sorted(records, key=lambda r: r.timestamp):
        if record.tier not in DRAWN:
            continue
        if record.render in number:
            found[number[record.render]].append(record)
            continue
        stamp = record.timestamp[:23]
        while call < len(marks) and marks[call][:23] < stamp:
            call += 1
        if record.render is None:  # written before: as it always was placed
            found[min(call, max(0, len(marks) - 1))].append(record)
        elif call < len(marks):
            found[call].append(record)
    return found


@dataclass(frozen=True)
class SessionRow:
    """One line of the session list."""

    id: str
    nodes: int
    created: str
    last_activity: str
    branches: int
    layers_active: int
    layers_made: int
    calls: int


@dataclass(frozen=True)
class Prompt:
    """A call's prompt exactly as sent, read back from its receipt (``exact``; a receipt
    written before messages were kept is rendered again from it); ``receipt`` None: the
    session has sent none yet, and this is its next prompt."""

    receipt: RenderReceipt | None
    rows: list[PromptRow]
    by_kind: dict[str, int]
    tokens: int
    budget: int
    tiers: list[str]
    exact: bool = False


@dataclass(frozen=True)
class Call:
    """One LLM call on the timeline: its receipt, and its prompt by kind when known."""

    number: int
    receipt: RenderReceipt
    by_kind: dict[str, int] | None
    compactions: list[CompactionRecord] = field(default_factory=list)

    @property
    def freed(self) -> int:
        """What the prompt shed in this call's render: the prompt as it stood before its
        first compaction, less what was sent (one figure, not each tier's saving summed:
        an offload's 'before' holds outputs the prompt never sent)."""
        if not self.compactions:
            return 0
        return max(0, max(r.tokens_before for r in self.compactions) - self.receipt.tokens)


class SentParts:
    """A sent prompt's tokens by part, from its receipt: each message read and counted
    once by its digest (a session's prompts share most of their messages), so stacking a
    page of calls by kind renders none of them again."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], tuple[dict[str, Any], int]] = {}

    def by_kind(
        self, storage: ContextStorage, receipt: RenderReceipt, counter: TokenCounter
    ) -> dict[str, int] | None:
        """The prompt's tokens by part (``KINDS``), or None for a receipt that kept no
        messages or sources (then only the prompt rendered again can say)."""
        digests = receipt.message_digests
        if not digests or len(receipt.sources) != len(digests):
            return None
        session = receipt.session
        unknown = [d for d in dict.fromkeys(digests) if (session, d) not in self._known]
        if unknown:
            found = storage.messages(unknown)
            if len(found) != len(unknown):
                return None
            if len(self._known) > KEPT:
                self._known.clear()
            for digest, text in found.items():
                message = json.loads(text)
                shape = {"role": message.get("role"), "tool_calls": bool(message.get("tool_calls"))}
                self._known[(session, digest)] = (shape, counter.count_message(message))
        by_kind: dict[str, int] = dict.fromkeys(PARTS, 0)
        for digest, source in zip(digests, receipt.sources, strict=True):
            shape, tokens = self._known[(session, digest)]
            by_kind[part_of(shape, source)] += tokens
        by_kind["tool schemas"] = max(0, receipt.tokens - sum(by_kind.values()))
        return by_kind
