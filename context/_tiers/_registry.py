"""The one registry of tier names: adding a tier is one module plus one entry here.

A policy's ``cascade`` names tiers from this registry; ``ContextEngine(tiers=...)`` also
takes :class:`~context.Tier` objects, so an application can run a tier of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._budget._names import TIER_NAMES
from .._errors import PolicyError
from . import (
    _collapse,
    _compact_ahead,
    _emergency,
    _microcompact,
    _offload,
    _reduce,
    _rereads,
    _snip,
)
from ._tier import Tier

TIERS: dict[str, Tier] = {
    tier.name: tier
    for tier in (
        _offload.TIER,
        _reduce.TIER,
        _rereads.TIER,
        _microcompact.TIER,
        _collapse.TIER,
        _snip.TIER,
        _compact_ahead.TIER,
        _compact_ahead.HALF_TIER,
        _emergency.TIER,
    )
}
"""Every tier by name."""

assert tuple(TIERS) == TIER_NAMES, "context._names.TierName lists the registry's tiers"


def resolve_tiers(tiers: Sequence[Tier | str]) -> list[Tier]:
    """Tier objects for names (or tiers), refusing unknown names and duplicates."""
    resolved: list[Tier] = []
    for tier in tiers:
        if isinstance(tier, str):
            if tier not in TIERS:
                raise PolicyError(f"unknown tier {tier!r}; known: {sorted(TIERS)}")
            tier = TIERS[tier]
        if any(t.name == tier.name for t in resolved):
            raise PolicyError(f"tier {tier.name!r} is listed twice")
        resolved.append(tier)
    return resolved
