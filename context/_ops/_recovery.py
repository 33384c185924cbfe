"""Tier 5, reactive: the provider refused the prompt as too long; render harder, or give up.

``engine.recover(error)`` recognizes litellm's ``ContextWindowExceededError``, an HTTP 413,
and the usual provider messages. Each consecutive failure renders under a tighter budget
(``recover_budget_factor`` of the last); from the second on, it compacts first. When the
provider says how many tokens it counted, the usage anchor learns from that too. A reported
success (``anchor_usage`` / ``note_success``) resets the count; the third failure in a row
raises :class:`~context.ContextOverflowError` (a circuit breaker, not a loop).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from graph import new_id

from .._errors import ContextError, ContextOverflowError
from .._store._records import CompactionRecord
from ._locking import locked

if TYPE_CHECKING:
    from .._budget._policy import Policy
    from .._budget._tokens import UsageAnchor
    from .._render._rendered import Rendered

_PHRASES = (
    "context_length_exceeded",
    "context length",
    "context window",
    "maximum context",
    "prompt is too long",
    "prompt too long",
    "too many tokens",
    "input is too long",
    "request too large",
    "request entity too large",
    "reduce the length",
    "exceeds the maximum",
)
_OPENAI = re.compile(
    r"maximum context length is ([\d,]+) tokens.*?(?:resulted in|requested) ([\d,]+)", re.S
)
_ANTHROPIC = re.compile(r"([\d,]+) tokens? > ([\d,]+)")
_COMPLETION = re.compile(r"([\d,]+) in the completion")


def is_context_overflow(error: BaseException) -> bool:
    """Whether ``error`` says the prompt was too long for the model (any provider).

    >>> is_context_overflow(ValueError("prompt is too long: 210000 tokens > 200000 maximum"))
    True
    >>> is_context_overflow(ValueError("rate limit"))
    False
    """
    if any(cls.__name__ == "ContextWindowExceededError" for cls in type(error).__mro__):
        return True
    status = getattr(error, "status_code", None)
    response = getattr(error, "response", None)
    if status is None and response is not None:
        status = getattr(response, "status_code", None)
    if status == 413:
        return True
    text = str(error).lower()
    return any(phrase in text for phrase in _PHRASES)


def reported_tokens(error: BaseException) -> tuple[int, int] | None:
    """(prompt tokens the provider counted, its limit) when the message says so; a
    completion the request reserved is not part of the prompt.

    >>> reported_tokens(ValueError("prompt is too long: 210,000 tokens > 200,000 maximum"))
    (210000, 200000)
    """
    text = str(error)
    found = _OPENAI.search(text)
    if found:
        counted = int(found.group(2).replace(",", ""))
        completion = _COMPLETION.search(text, found.end())
        if completion:
            counted -= int(completion.group(1).replace(",", ""))
        return counted, int(found.group(1).replace(",", ""))
    found = _ANTHROPIC.search(text)
    if found:
        return int(found.group(1).replace(",", "")), int(found.group(2).replace(",", ""))
    return None


class Recovery:
    """``recover`` of :class:`~context.ContextEngine`."""

    if TYPE_CHECKING:
        from graph import GraphReader

        from .._tiers._book import LayerBook

        graph: GraphReader
        lock: threading.RLock
        policy: Policy
        squeeze: float
        failures: int
        clock: Callable[[], datetime]
        anchor: UsageAnchor
        last: Rendered | None

        def render(
            self, head: str | None = None, frame: str | None = None, *, preview: bool = False
        ) -> Rendered: ...

        def compact(
            self, focus: str | None = None, *, head: str | None = None, frame: str | None = None
        ) -> object: ...

        def _save_anchor(self) -> None: ...

        def _log(self, record: CompactionRecord) -> None: ...

    @locked
    def recover(
        self, error: BaseException, *, head: str | None = None, frame: str | None = None
    ) -> Rendered:
        """A harder render after ``error`` (a context overflow), or
        :class:`~context.ContextOverflowError` on the third failure in a row."""
        if not is_context_overflow(error):
            raise ContextError(f"not a context-overflow error: {error!r}") from error
        started = time.perf_counter()
        self.failures += 1
        if self.failures >= self.policy.recover_max_failures:
            count = self.failures
            self.failures = 0
            self.squeeze = 1.0
            raise ContextOverflowError(
                f"the provider refused the prompt as too long {count} times in a row "
                f"(last: {error}); a smaller budget or a model with a larger window is needed"
            ) from error
        before = self.last.tokens if self.last is not None else 0
        messages_before = len(self.last.messages) if self.last is not None else 0
        counted = reported_tokens(error)
        if counted is not None and before > 0:
            self.anchor.anchor_usage(before, counted[0])
            self._save_anchor()
        self.squeeze *= self.policy.recover_budget_factor
        steps = [f"budget × {self.squeeze:.2f}"]
        if self.failures >= 2:
            try:
                self.compact(head=head, frame=frame)
                steps.append("compacted")
            except ContextError as failed:
                steps.append(f"could not compact: {failed}")
        rendered = self.render(head, frame)
        self._log(
            CompactionRecord(
                id=new_id(),
                session=self.graph.session,
                timestamp=self.clock().isoformat(),
                tier="reactive",
                tokens_before=before,
                tokens_after=rendered.tokens,
                messages_before=messages_before,
                messages_after=len(rendered.messages),
                ratio=round(rendered.tokens / before, 4) if before else 1.0,
                duration_ms=round((time.perf_counter() - started) * 1000, 3),
                error=str(error)[:500],
                details={"attempt": self.failures, "steps": steps, "reported": counted},
            )
        )
        return rendered
