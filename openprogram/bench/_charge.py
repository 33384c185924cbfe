"""What every summary would cost from an LLM, whichever summarizer made it.

The heuristic summarizer reports 0 tokens, so a bench that charged only reported usage
counted its summaries as free, while an LLM summarizer is paid for each. :class:`Charged`
wraps the summarizer an engine uses and charges every summary it is asked for as the request
an LLM summarizer would receive (``LiteLLMSummarizer``'s own prompt: system prompt, tools,
the covered conversation fitted to its window, the instructions), counted with the bench's
tokenizer, at the uncached input price, plus the summary as output at the output price.
A summarizer that reports its usage (an LLM one) is charged what it reported. A summary
that no layer ends up using (it was no shorter) is charged too: it was asked for. The
request is charged as sent: its ``units`` (each text bounded, see ``Policy.summary_item_chars``),
never its ``sources``, from which identifiers are ranked locally at no LLM cost.
"""

from __future__ import annotations

from typing import Any

import msgspec

from context import LiteLLMSummarizer, Summarizer, SummaryRequest, SummaryResult, TokenCounter

OUTPUT_PRICE = 5.0
"""An output token in units of one uncached input token (Anthropic's and most OpenAI models'
output-to-input price ratio is 4–5; Claude Haiku 4.5: $5 against $1)."""
SUMMARIZER_WINDOW = 200_000
"""The window of the summarizer the request is shaped for (a Claude Haiku class model)."""


class _PromptShaper(LiteLLMSummarizer):
    """``LiteLLMSummarizer``'s request, counted with the bench's tokenizer, never sent."""

    __slots__ = ("_bench_counter",)

    def __init__(self, counter: TokenCounter) -> None:
        super().__init__(
            "anthropic/claude-haiku-4-5",
            max_input_tokens=SUMMARIZER_WINDOW,
            max_output_tokens=None,
        )
        self._bench_counter = counter

    @property
    def counter(self) -> TokenCounter:
        return self._bench_counter

    def limits(self, request: SummaryRequest) -> tuple[int, int]:
        """The window without a model lookup (no litellm import in the bench's hot path)."""
        output = request.max_tokens
        return SUMMARIZER_WINDOW - output - SUMMARIZER_WINDOW // 10, output


class Charged:
    """A summarizer that charges each summary it makes (see the module docstring); every
    other attribute is the wrapped summarizer's, so the engine sees no difference."""

    def __init__(self, inner: Summarizer, counter: TokenCounter) -> None:
        self.inner = inner
        self.calls = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self._shaper = _PromptShaper(counter)
        self._counter = counter

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        result: SummaryResult = self.inner.summarize(request)
        tokens_in, tokens_out = result.tokens_in, result.tokens_out
        if not tokens_in and isinstance(result, SummaryResult):
            messages, tools = self._shaper.messages(request)
            tokens_in = self._counter.count_messages(messages) + self._counter.count_tools(tools)
            tokens_out = self._counter.count_text(result.text(identifiers=False))
            result = msgspec.structs.replace(result, tokens_in=tokens_in, tokens_out=tokens_out)
        self.calls += 1
        self.tokens_in += tokens_in
        self.tokens_out += tokens_out
        return result

    @property
    def cost(self) -> float:
        """What the summaries cost, in uncached input tokens."""
        return self.tokens_in + OUTPUT_PRICE * self.tokens_out
