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
import time
from dataclasses import dataclass
from datetime import datetime

from graph import new_id

from .._budget._policy import Policy
from .._errors import ContextError, ContextOverflowError
from .._render._rendered import Rendered
from .._store._records import CompactionRecord, wall_clock

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


@dataclass(frozen=True)
class Overflow:
    """One accepted overflow: what was sent, what the provider said, what to do."""

    error: BaseException
    attempt: int
    before: int
    messages_before: int
    counted: tuple[int, int] | None
    compact_first: bool
    started: float


class Recovery:
    """Owns the overflow count and the budget squeeze (the engine runs the render)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.squeeze = 1.0
        """Share of the budget a render may use; an overflow lowers it."""
        self.failures = 0

    def overflow(self, error: BaseException, last: Rendered | None) -> Overflow:
        """Count an overflow and squeeze the budget, or raise: ``ContextError`` for an
        error that is not an overflow, :class:`~context.ContextOverflowError` on the
        third failure in a row (a circuit breaker, not a loop)."""
        if not is_context_overflow(error):
            raise ContextError(f"not a context-overflow error: {error!r}") from error
        started = time.perf_counter()
        self.failures += 1
        if self.failures >= self.policy.recover_max_failures:
            count = self.failures
            self.note_success()
            raise ContextOverflowError(
                f"the provider refused the prompt as too long {count} times in a row "
                f"(last: {error}); a smaller budget or a model with a larger window is needed"
            ) from error
        self.squeeze *= self.policy.recover_budget_factor
        return Overflow(
            error,
            self.failures,
            last.tokens if last is not None else 0,
            len(last.messages) if last is not None else 0,
            reported_tokens(error),
            self.failures >= 2,
            started,
        )

    def note_success(self) -> None:
        """The provider accepted the last prompt: forget earlier overflows."""
        self.failures = 0
        self.squeeze = 1.0

    def record(
        self,
        overflow: Overflow,
        rendered: Rendered,
        steps: list[str],
        session: str,
        now: datetime,
    ) -> CompactionRecord:
        """The record of a recovery, once its harder render is made."""
        before = overflow.before
        return CompactionRecord(
            id=new_id(),
            session=session,
            timestamp=wall_clock(),
            tier="reactive",
            tokens_before=before,
            tokens_after=rendered.tokens,
            messages_before=overflow.messages_before,
            messages_after=len(rendered.messages),
            ratio=round(rendered.tokens / before, 4) if before else 1.0,
            duration_ms=round((time.perf_counter() - overflow.started) * 1000, 3),
            error=str(overflow.error)[:500],
            details={"attempt": overflow.attempt, "steps": steps, "reported": overflow.counted},
            render=rendered.id or None,
            clock=now.isoformat(),
        )
