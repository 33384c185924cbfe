"""``engine.recover(error)`` with litellm's own exception objects: harder renders, a circuit
breaker, resets on success, and what the provider's message says about token counts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _context_helpers import policy
from _layer_helpers import clock, session

from context import (
    ContextEngine,
    ContextError,
    ContextOverflowError,
    is_context_overflow,
    reported_tokens,
    tool_pair_problems,
)
from graph import ConversationGraph

OPENAI_TEXT = (
    "This model's maximum context length is 8,192 tokens. However, your messages resulted "
    "in 9,000 tokens. Please reduce the length of the messages."
)
ANTHROPIC_TEXT = "prompt is too long: 210,000 tokens > 200,000 maximum"


def window_exceeded(text: str = OPENAI_TEXT) -> Exception:
    import litellm

    error: Exception = litellm.ContextWindowExceededError(
        message=text, model="gpt-4o", llm_provider="openai"
    )
    return error


def bad_request(text: str) -> Exception:
    import litellm

    error: Exception = litellm.BadRequestError(
        message=text, model="claude-sonnet-4-5", llm_provider="anthropic"
    )
    return error


def rate_limited() -> Exception:
    import litellm

    error: Exception = litellm.RateLimitError(
        message="Rate limit reached, retry in 20s", llm_provider="openai", model="gpt-4o"
    )
    return error


def long_engine(tmp_path: Path, g: ConversationGraph | None = None) -> ContextEngine:
    if g is None:
        g = ConversationGraph.memory("s1")
        session(g, 30)
    return ContextEngine(g, policy(tmp_path), budget=8_000, clock=clock)


# -- recognizing overflows ------------------------------------------------------------


def test_litellm_overflow_errors_are_recognized() -> None:
    assert is_context_overflow(window_exceeded())
    assert is_context_overflow(bad_request("This model's maximum context length is 8192 tokens"))
    assert is_context_overflow(bad_request(ANTHROPIC_TEXT))
    assert not is_context_overflow(rate_limited())
    assert not is_context_overflow(bad_request("Invalid value for 'temperature'"))


def test_an_http_413_is_an_overflow() -> None:
    class Refused(Exception):
        status_code = 413

    class Response:
        status_code = 413

    class Wrapped(Exception):
        response = Response()

    assert is_context_overflow(Refused("payload"))
    assert is_context_overflow(Wrapped("payload"))

    class Other(Exception):
        status_code = 500

    assert not is_context_overflow(Other("server error"))


def test_reported_tokens_reads_openai_and_anthropic_messages() -> None:
    assert reported_tokens(window_exceeded()) == (9_000, 8_192)
    assert reported_tokens(bad_request(ANTHROPIC_TEXT)) == (210_000, 200_000)
    assert (
        reported_tokens(bad_request("input length and `max_tokens` exceed context limit")) is None
    )
    openai_requested = (
        "This model's maximum context length is 128000 tokens. However, you requested "
        "130500 tokens (120500 in the messages, 10000 in the completion)."
    )
    assert reported_tokens(ValueError(openai_requested)) == (120_500, 128_000)


# -- harder renders and the circuit breaker -------------------------------------------------


def test_each_recovery_renders_harder_and_the_third_failure_gives_up(tmp_path: Path) -> None:
    e = long_engine(tmp_path)
    first = e.render()
    assert first.fits
    one = e.recover(window_exceeded("maximum context length exceeded"))
    assert one.tokens < first.tokens
    assert tool_pair_problems(one.messages) == []
    two = e.recover(bad_request("This model's maximum context length is 8192 tokens"))
    assert two.tokens < one.tokens
    assert tool_pair_problems(two.messages) == []
    with pytest.raises(ContextOverflowError, match="3 times in a row") as caught:
        e.recover(window_exceeded())
    assert isinstance(caught.value, ContextError)
    assert isinstance(caught.value.__cause__, Exception)
    reactive = [r for r in e.records() if r.tier == "reactive"]
    assert [r.details["attempt"] for r in reactive] == [1, 2]
    assert reactive[0].tokens_before == first.tokens and reactive[0].tokens_after == one.tokens
    assert reactive[1].details["steps"][-1] == "compacted"
    assert all(r.error for r in reactive)
    # The breaker reset: the next overflow starts over at the first step.
    again = e.recover(window_exceeded("maximum context length exceeded"))
    assert e.failures == 1
    assert again.fits


@pytest.mark.parametrize("reset", ["note_success", "anchor_usage"])
def test_a_success_resets_the_count(tmp_path: Path, reset: str) -> None:
    e = long_engine(tmp_path)
    first = e.render()
    e.recover(window_exceeded("context window exceeded"))
    e.recover(window_exceeded("context window exceeded"))
    assert e.failures == 2
    if reset == "note_success":
        e.note_success()
    else:
        e.anchor_usage(e.last.tokens if e.last else 1)
    assert e.failures == 0 and e.squeeze == 1.0
    # Two more failures are allowed again before the breaker trips.
    e.recover(window_exceeded("context window exceeded"))
    e.recover(window_exceeded("context window exceeded"))
    with pytest.raises(ContextOverflowError):
        e.recover(window_exceeded("context window exceeded"))
    assert first.fits


def test_a_non_overflow_error_is_refused(tmp_path: Path) -> None:
    e = long_engine(tmp_path)
    before = e.render()
    for error in (rate_limited(), bad_request("Invalid value for 'temperature'")):
        with pytest.raises(ContextError, match="not a context-overflow error") as caught:
            e.recover(error)
        assert caught.value.__cause__ is error
        assert not isinstance(caught.value, ContextOverflowError)
    assert e.failures == 0 and e.squeeze == 1.0
    assert [r.tier for r in e.records() if r.tier == "reactive"] == []
    assert e.render().messages == before.messages


# -- the anchor learns from the provider's count ----------------------------------------


def test_the_anchor_learns_from_the_reported_count(tmp_path: Path) -> None:
    g = ConversationGraph.open(tmp_path / "op.db", session="s1")
    try:
        session(g, 30)
        e = long_engine(tmp_path, g)
        first = e.render()
        assert e.anchor.ratio == 1.0
        e.recover(window_exceeded(OPENAI_TEXT))
        assert e.anchor.ratio == pytest.approx(9_000 / first.tokens)
        record = [r for r in e.records() if r.tier == "reactive"][-1]
        assert record.details["reported"] == [9_000, 8_192]
        # A restarted engine (same policy and budget) starts from the learned ratio.
        restarted = long_engine(tmp_path, g)
        assert restarted.anchor.ratio == pytest.approx(e.anchor.ratio)
        # An Anthropic message teaches it too (an odd count moves it at most twofold).
        expected = e.anchor.adjust(first.tokens)
        e.recover(bad_request(ANTHROPIC_TEXT))
        assert expected < e.anchor.adjust(first.tokens) <= 2 * expected + 1
        assert e.anchor.ratio <= 2.0
    finally:
        g.close()


def test_a_message_without_counts_leaves_the_anchor_alone(tmp_path: Path) -> None:
    e = long_engine(tmp_path)
    e.render()
    e.recover(window_exceeded("context window exceeded"))
    assert e.anchor.ratio == 1.0
    record: Any = [r for r in e.records() if r.tier == "reactive"][-1]
    assert record.details["reported"] is None
    assert record.details["steps"] == ["budget × 0.80"]
