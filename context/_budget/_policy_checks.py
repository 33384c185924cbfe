"""The checks across ``Policy`` fields (apart, so the settings module holds settings): each
names the settings that disagree, in one line."""

from __future__ import annotations

from typing import Protocol

from .._errors import PolicyError
from ._names import TIER_NAMES, as_tier


class Checked(Protocol):
    """The settings the checks read (``Policy``'s; a protocol, as ``Policy`` imports this)."""

    @property
    def cascade(self) -> tuple[str, ...]: ...
    @property
    def always(self) -> tuple[str, ...]: ...
    @property
    def triggers(self) -> dict[str, float]: ...
    @property
    def reduction_head_chars(self) -> int: ...
    @property
    def reduction_tail_chars(self) -> int: ...
    @property
    def budget_reduction_chars(self) -> int: ...
    @property
    def max_output_tokens(self) -> int: ...
    @property
    def context_window(self) -> int: ...
    @property
    def collapse_min_rounds(self) -> int: ...
    @property
    def collapse_max_rounds(self) -> int: ...
    @property
    def cache_read_price(self) -> float: ...
    @property
    def cache_write_price(self) -> float: ...


def check_policy(policy: Checked) -> None:
    """Raise :class:`PolicyError` for settings that are valid alone but not together."""
    unknown = [t for t in (*policy.cascade, *policy.always, *policy.triggers) if as_tier(t) is None]
    if unknown:
        raise PolicyError(f"cascade: unknown tier(s) {unknown}; known: {sorted(TIER_NAMES)}")
    if policy.reduction_head_chars + policy.reduction_tail_chars > policy.budget_reduction_chars:
        raise PolicyError(
            "reduction_head_chars + reduction_tail_chars must not exceed "
            "budget_reduction_chars, or reduction would not shorten anything"
        )
    if policy.max_output_tokens >= policy.context_window:
        raise PolicyError("max_output_tokens must be smaller than context_window")
    if policy.collapse_min_rounds > policy.collapse_max_rounds:
        raise PolicyError("collapse_min_rounds must not exceed collapse_max_rounds")
    if policy.cache_read_price >= policy.cache_write_price:
        raise PolicyError(
            "cache_read_price must be below cache_write_price, or a cached prefix "
            "would cost no less than rewriting it"
        )
    bad = {k: v for k, v in policy.triggers.items() if not 0 <= v <= 1}
    if bad:
        raise PolicyError(f"triggers must be shares of the budget in [0, 1], got {bad}")
