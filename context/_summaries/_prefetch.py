"""Summaries computed ahead of need, off the hot path.

With an LLM summarizer, a collapse that waits for its summaries stalls the turn. From
``policy.proactive_share`` of the budget, the collapse tier hands the segments it would
collapse next to a worker thread; when the budget does require them, the summary is
usually ready. A summary is used only when the budget requires the collapse — never
because it happens to be ready — and a collapse whose summary is still being computed
waits for that one call instead of making another, so what a render shows never depends
on timing, only how long it takes.

Under ``Policy.summary_wait = "never"`` a render does not wait: a summary that is not
done is left running (or started) and the render goes without it (``ready``).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from ._summary import Summarizer, SummaryRequest, SummaryResult

if TYPE_CHECKING:
    from .._budget._policy import Policy


class Prefetcher:
    """A one-worker queue of summary requests, each computed once, keyed by segment."""

    def __init__(self, summarizer: Summarizer) -> None:
        self.summarizer = summarizer
        self._pool: ThreadPoolExecutor | None = None
        self._futures: dict[str, Future[SummaryResult]] = {}
        self._lock = threading.Lock()
        self.scheduled = 0

    def ahead(self, key: str, request: SummaryRequest) -> None:
        """Start summarizing ``request`` unless it was started before."""
        with self._lock:
            if key in self._futures:
                return
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="openprogram-summary")
            self._futures[key] = self._pool.submit(self.summarizer.summarize, request)
            self.scheduled += 1

    @classmethod
    def wanted(cls, summarizer: Summarizer, policy: Policy) -> Prefetcher | None:
        """A prefetcher for a slow (``proactive``) summarizer when the policy computes
        summaries ahead or never waits for one; None otherwise."""
        if not getattr(summarizer, "proactive", False):
            return None
        if policy.proactive_share is None and policy.summary_wait == "always":
            return None
        return cls(summarizer)

    def started(self, key: str) -> bool:
        with self._lock:
            return key in self._futures

    def ready(self, key: str) -> bool:
        """Whether the summary started for ``key`` is done (a render may take it now)."""
        with self._lock:
            future = self._futures.get(key)
        return future is not None and future.done()

    def take(self, key: str) -> Future[SummaryResult] | None:
        """The summary started for ``key`` (done or running), removed from the queue."""
        with self._lock:
            return self._futures.pop(key, None)

    def pending(self) -> int:
        with self._lock:
            return sum(1 for future in self._futures.values() if not future.done())

    def close(self) -> None:
        """Stop the worker; summaries not started are dropped."""
        with self._lock:
            pool, self._pool = self._pool, None
            for future in self._futures.values():
                future.cancel()
            self._futures.clear()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
