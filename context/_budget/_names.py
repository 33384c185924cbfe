"""The closed sets of names ``context`` compares on: tier names and layer kinds
(item variants are declared with the items, in ``_view``).

Each is a ``Literal`` declared once here, at the bottom of the import order, so mypy
(``--strict-equality``) rejects a comparison with a misspelt value. The values are the
strings stored in the database, receipts and exports; a ``Literal`` keeps them plain
``str``, byte for byte. Names that arrive as plain ``str`` (a graph layer's kind, a custom
tier's name, a record read back) are compared through :func:`as_tier` and
:func:`as_layer_kind`, which give the closed type or ``None``.
"""

from __future__ import annotations

from typing import Literal, TypeAlias, get_args

TierName: TypeAlias = Literal[
    "offload",
    "budget_reduction",
    "rereads",
    "microcompact",
    "collapse",
    "snip",
    "compact",
    "summarize_half",
    "emergency",
]
"""The registry's tiers (``context._registry.TIERS``), in its order."""

TIER_NAMES: tuple[TierName, ...] = get_args(TierName)

RecordTier: TypeAlias = Literal[TierName, "provider", "rollback"]
"""Who a compaction record names: a registry tier, a provider's compaction, a rollback."""

LayerKind: TypeAlias = Literal["collapse", "compact", "provider"]
"""The layers ``context`` makes (graph stores any kind; other makers' layers pass through)."""

LAYER_KINDS: tuple[LayerKind, ...] = get_args(LayerKind)

_TIERS: dict[str, TierName] = {name: name for name in TIER_NAMES}
_KINDS: dict[str, LayerKind] = {kind: kind for kind in LAYER_KINDS}
_RECORDERS: dict[str, RecordTier] = {name: name for name in get_args(RecordTier)}


def as_tier(name: str) -> TierName | None:
    """``name`` as a registry tier name, or None (a custom tier, an engine step)."""
    return _TIERS.get(name)


def as_record_tier(name: str) -> RecordTier | None:
    """A record's ``tier`` as one of the closed names, or None (a custom tier's record)."""
    return _RECORDERS.get(name)


def as_layer_kind(kind: str) -> LayerKind | None:
    """``kind`` as one of context's layer kinds, or None (another maker's layer)."""
    return _KINDS.get(kind)
