"""``RecordFacts``: what one compaction record says, typed by who wrote it.

A record keeps what its tier reported in ``details`` (a plain mapping: the stored form,
which records written by every version share); :attr:`CompactionRecord.facts` reads it
as one of these structs, tagged by the record's ``tier``, so a reader asks ``facts.layer``
of a compaction or ``facts.layers`` of a rollback instead of looking keys up by name.
A custom tier's record, or one whose details do not fit, has no facts (None).
"""

from __future__ import annotations

from typing import Any, TypeAlias, cast

import msgspec


class _Facts(msgspec.Struct, frozen=True, kw_only=True, tag_field="tier"):
    """Fields every kind may have."""


class OffloadFacts(_Facts, frozen=True, tag="offload"):
    """Tool outputs moved to files (the record's ``offloaded`` names each)."""


class ReductionFacts(_Facts, frozen=True, tag="budget_reduction"):
    reduced: list[str] | int = 0
    """The outputs cut to their head and tail (node ids)."""


class RereadsFacts(_Facts, frozen=True, tag="rereads"):
    superseded: int = 0
    """Reads whose file was read again or rewritten later, shown as a note."""


class MicrocompactFacts(_Facts, frozen=True, tag="microcompact"):
    trigger: str = ""
    cleared: int = 0
    cache_edits: bool = False
    """Cleared by the provider (a context edit), the messages sent unchanged."""


class SnipFacts(_Facts, frozen=True, tag="snip"):
    dropped_units: int = 0
    low_water: int = 0


class EmergencyFacts(_Facts, frozen=True, tag="emergency"):
    steps: list[str] = msgspec.field(default_factory=list)


class LayerFacts(_Facts, frozen=True):
    """A record that made a layer (or refused to: ``layer`` is then None)."""

    layer: str | None = None
    reason: str = ""
    summarizer: dict[str, Any] | None = None


class CollapseFacts(LayerFacts, frozen=True, tag="collapse"):
    segment: str | None = None


class CompactFacts(LayerFacts, frozen=True, tag="compact"):
    focus: str | None = None
    incremental: bool = False


class SummarizeHalfFacts(CompactFacts, frozen=True, tag="summarize_half"):
    """A compaction of the older half (the ``summarize_half`` tier)."""


class ProviderFacts(LayerFacts, frozen=True, tag="provider"):
    provider: str = ""
    items: int = 0


class MadeAgain(msgspec.Struct, frozen=True):
    """A layer the render after a rollback makes again (restored rounds that do not fit)."""

    kind: str
    covers: int
    """How many nodes it covers."""
    first: str
    """The first of them."""


class RollbackFacts(_Facts, frozen=True, tag="rollback"):
    layer: str | None = None
    """The layer asked for (None in records written before: ``layers`` holds it)."""
    layers: list[str] = msgspec.field(default_factory=list)
    """The layers it ended: the one asked for and those built on it."""
    kind: str = ""
    reason: str | None = None
    again: list[MadeAgain] = msgspec.field(default_factory=list)
    """What the next render makes again (empty: the restored rounds show whole; records
    written before did not say)."""


class ReactiveFacts(_Facts, frozen=True, tag="reactive"):
    attempt: int = 0
    steps: list[str] = msgspec.field(default_factory=list)
    reported: list[int] | None = None
    """The provider's reported prompt size and limit, when its error said them."""


RecordFacts: TypeAlias = (
    OffloadFacts
    | ReductionFacts
    | RereadsFacts
    | MicrocompactFacts
    | SnipFacts
    | EmergencyFacts
    | CollapseFacts
    | CompactFacts
    | SummarizeHalfFacts
    | ProviderFacts
    | RollbackFacts
    | ReactiveFacts
)
"""One record's facts, tagged by its tier."""


def facts_of(tier: str, details: dict[str, Any]) -> RecordFacts | None:
    """``details`` read as the facts of a ``tier`` record; None for a tier not known here
    or details that do not fit."""
    try:
        found = msgspec.convert({**details, "tier": tier}, RecordFacts)
    except (msgspec.ValidationError, TypeError):
        return None
    return cast("RecordFacts", found)
