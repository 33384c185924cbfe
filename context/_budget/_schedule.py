"""The cache schedule: when the cascade compacts and how far down, from what it costs.

Prices are in units of one uncached input token, as the bench measures them: a token read
from the prompt cache costs ``read`` (Anthropic: 0.1), a token written to it ``write``
(1.25), a summary its request at 1.0 plus its answer at ``SUMMARY_OUTPUT_PRICE``.

After a compaction the prompt holds ``K`` tokens (the target), of which the first ``F``
(``prefix``: the system prompt and the task, pinned) are still cached. The session then
grows by ``g`` tokens a turn until the prompt reaches the trigger ``K + D``, where the
next compaction rewrites everything after ``F`` again. Over that cycle of ``D / g`` turns,
each turn reads what it keeps and writes what it adds, and the compaction once rewrites
``K - F`` tokens and pays for its summary ``S``::

    cost per turn = read * (K + D / 2) + write * g + g * A / D,
    where A = (write - read) * (K - F) + S

This is the economic-order-quantity shape: the headroom that minimizes it is
``D* = sqrt(2 * g * A / read)``. The cost rises with ``K`` at every ``D``, so what keeps
tokens is recall, not cost: the target is the policy's floor of kept tokens
(``schedule_floor_tokens``), and the schedule decides the trigger, ``K + D*``, compacting
under the budget when a slow-growing session pays less for a shorter cycle than for reading
a fuller prompt every turn. The faster the session grows and the dearer a rewrite (writes
against reads), the deeper each compaction cuts below its trigger; the dearer reads, the
earlier it compacts.

>>> plan = cache_schedule(trigger=80_000, ceiling=100_000, prefix=2_000, growth=800,
...                       summary=30_000, floor=24_000, read=0.1, write=1.25)
>>> plan.target, plan.trigger
(24000, 53745)
>>> full = cost_per_turn(24_000, 80_000 - 24_000, prefix=2_000, growth=800,
...                      summary=30_000, read=0.1, write=1.25)
>>> early = cost_per_turn(plan.target, plan.trigger - plan.target, prefix=2_000,
...                       growth=800, summary=30_000, read=0.1, write=1.25)
>>> round(full), round(early)
(6990, 6375)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from .._view import Unit
from ._policy import Policy

SUMMARY_OUTPUT_PRICE = 5.0
"""A summary's answer token against an uncached input token (the bench's output price)."""


class Plan(NamedTuple):
    """Where a triggered cascade shrinks to (``target``) and the prompt size at which the
    compaction tier acts (``trigger``)."""

    target: int
    trigger: int


def cost_per_turn(
    kept: int,
    headroom: int,
    *,
    prefix: int,
    growth: float,
    summary: float,
    read: float,
    write: float,
) -> float:
    """The expected cost of one turn over a cycle that compacts to ``kept`` tokens and again
    ``headroom`` tokens later (see the module docstring)."""
    rewrite = (write - read) * max(0, kept - prefix) + summary
    return read * (kept + headroom / 2) + write * growth + growth * rewrite / max(1, headroom)


def cache_schedule(
    *,
    trigger: int,
    ceiling: int,
    prefix: int,
    growth: float,
    summary: float,
    floor: int,
    read: float,
    write: float,
) -> Plan:
    """The cheapest plan under the ``trigger`` the policy sets (the budget, or
    ``compact_tokens``), keeping at least ``floor`` tokens but at most ``ceiling`` (the
    policy's low-water share of the budget): the floor as target, and the trigger that
    minimizes :func:`cost_per_turn`. A cycle is never shorter than two turns of growth nor
    than an eighth of the trigger (a compaction must have something to summarize)."""
    target = max(1, min(floor, ceiling, trigger))
    room = trigger - target
    if room <= 0 or growth <= 0:
        return Plan(target, trigger)
    rewrite = (write - read) * max(0, target - prefix) + summary
    best = math.sqrt(2 * growth * rewrite / read)
    least = max(2 * growth, trigger / 8)
    headroom = min(room, max(least, best))
    return Plan(target, target + int(headroom))


GROWTH_ROUNDS = 8
"""The newest rounds whose mean size is the session's growth per turn."""


def plan_for(policy: Policy, budget: int, units: Sequence[Unit]) -> Plan:
    """The cache schedule's plan for a render of ``units`` (the walk before any tier) under
    ``budget``: the growth per turn is the mean size of the newest rounds as walked (what
    each turn appends, before any tier cuts it), the prefix the leading pinned units, the
    summary what the bench charges for one (its bounded request, the agent's prefix when a
    request carries it, and at the output price the answer a compaction at the trigger may
    write). The floor is at most ``low_water`` of the budget, and where that is past the
    trigger (``compact_tokens`` in a large window) it leaves an eighth of the trigger free."""
    trigger = max(1, int(policy.threshold("compact", budget)))
    ceiling = int(budget * policy.low_water)
    if ceiling >= trigger:
        ceiling = trigger - trigger // 8
    ceiling = max(1, ceiling)
    floor = policy.schedule_floor_tokens
    if policy.schedule_floor_exponent is not None:
        scale = min(1.0, budget / policy.schedule_floor_budget)
        floor = max(1, int(floor * scale**policy.schedule_floor_exponent))
    if policy.schedule_floor_share is not None:
        floor = max(floor, int(budget * policy.schedule_floor_share))
    target = min(floor, ceiling)
    prefix = 0
    for unit in units:
        if not unit.pinned or unit.kind == "layer":
            break
        prefix += unit.tokens
    rounds: list[int] = []
    for unit in reversed(units):
        if len(rounds) == GROWTH_ROUNDS:
            break
        if unit.kind == "round":
            rounds.append(unit.tokens)
    growth = sum(rounds) / len(rounds) if rounds else 0.0
    request = policy.summary_request_bound(budget) or policy.summary_request_tokens or 0
    replaced = max(0, trigger - prefix - int(target * policy.compact_keep_share))
    answer = policy.compact_summary_bound(replaced, target)
    shared = prefix if policy.summary_shares_prefix else 0
    summary = request + shared + SUMMARY_OUTPUT_PRICE * answer
    return cache_schedule(
        trigger=trigger,
        ceiling=ceiling,
        prefix=prefix,
        growth=growth,
        summary=summary,
        floor=floor,
        read=policy.cache_read_price,
        write=policy.cache_write_price,
    )
