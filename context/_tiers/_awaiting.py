"""Whether a render waits for a summary (``Policy.summary_wait``), and what each did.

Each summary a render needs is ``adopted`` (computed ahead and done: no wait), ``waited``
(asked now, or computed ahead and still running) or ``went without``: under ``never`` a
summary that is not done is left running (or started) on the prefetcher's worker, the tier
falls back to the cheaper ones for this render, and a later render takes it. The render
(``Rendered.summary``) and its receipt keep the most telling of them.
"""

from __future__ import annotations

from collections.abc import Callable

from .._summaries._summary import SummaryRequest, SummaryResult
from ._tier import TierContext

__all__ = ["NOT_READY", "summary_call"]

NOT_READY = "summary not ready: it is being prepared for a later render"
"""Why a tier went without its summary (not a failure: nothing is marked failed)."""
_RANK = {"": 0, "adopted": 1, "waited": 2, "went without": 3}


def summary_call(
    ctx: TierContext, request: SummaryRequest, key: str | None, *, wait: bool
) -> Callable[[], SummaryResult] | None:
    """How this render gets the summary of ``request`` (started ahead under ``key``, if
    at all); None: it goes without it (``summary_wait = "never"`` and not ``wait``)."""
    summarizer = ctx.summarizer
    assert summarizer is not None
    prefetch = ctx.prefetch
    if prefetch is not None and key is not None:
        if not wait and ctx.policy.summary_wait == "never" and not prefetch.ready(key):
            prefetch.ahead(key, request)  # started once, kept running
            ctx.without_summary = True
            _note(ctx, "went without")
            return None
        ahead = prefetch.take(key)
        if ahead is not None:
            _note(ctx, "adopted" if ahead.done() else "waited")
            return ahead.result
    _note(ctx, "waited")
    return lambda: summarizer.summarize(request)


def _note(ctx: TierContext, what: str) -> None:
    if _RANK[what] > _RANK.get(ctx.decisions.summary, 0):
        ctx.decisions.summary = what
