"""Honest cost: every summary is charged as an LLM summarizer's request and answer."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from context import (
    HeuristicSummarizer,
    Item,
    LiteLLMSummarizer,
    SummaryRequest,
    SummaryResult,
    TokenCounter,
    Unit,
)
from openprogram.bench import Charged, MessageCounter, compute_metrics, load_trace, run_policy

OUTPUT_PRICE = 5.0  # an output token against an uncached input token, as the bench charges it


def request(size: int = 50) -> SummaryRequest:
    text = "I will fix src/app.py by calling parse_header first. " * size
    unit = Unit((Item({"role": "assistant", "content": text}, size * 12),), "round", 0)
    return SummaryRequest(kind="segment", units=(unit,), task="fix the parser", max_tokens=300)


def test_a_heuristic_summary_is_charged_as_the_llm_request_and_answer() -> None:
    counter = TokenCounter()
    charged = Charged(HeuristicSummarizer(), counter)
    result = charged.summarize(request())
    assert charged.name == "heuristic"  # the engine sees the wrapped summarizer
    prompt, tools = LiteLLMSummarizer("x", max_input_tokens=200_000).messages(request())
    assert not tools
    assert result.tokens_in == charged.tokens_in >= counter.count_messages(prompt) - 5
    assert result.tokens_out == counter.count_text(result.text(identifiers=False)) > 0
    assert charged.cost == charged.tokens_in + OUTPUT_PRICE * charged.tokens_out
    bigger = Charged(HeuristicSummarizer(), counter)
    bigger.summarize(request(200))
    assert bigger.tokens_in > charged.tokens_in  # the request grows with what it covers


class Reporting:
    name = "reporting"

    def summarize(self, req: SummaryRequest) -> SummaryResult:
        result = HeuristicSummarizer().summarize(req)
        return msgspec.structs.replace(result, tokens_in=1234, tokens_out=56)


def test_a_summarizer_that_reports_usage_is_charged_what_it_reported() -> None:
    charged = Charged(Reporting(), TokenCounter())
    charged.summarize(request())
    charged.summarize(request(3))
    assert (charged.calls, charged.tokens_in, charged.tokens_out) == (2, 2468, 112)


def test_cost_adds_the_summaries_cost() -> None:
    free = compute_metrics(
        [], trace="t", policy="p", first_user_text="", budget=10, count_message=len
    )
    paid = compute_metrics(
        [], trace="t", policy="p", first_user_text="", budget=10, count_message=len,
        summarizer_tokens=30, summarizer_cost=70.0,
    )  # fmt: skip
    assert (free.cost, paid.cost, paid.summarizer_tokens) == (0.0, 70.0, 30)


def test_the_bench_charges_our_heuristic_summaries(tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "task: fix src/app.py"}]
    for i in range(40):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "Read", "arguments": json.dumps({"file_path": f"src/m{i}.py"})},
        }
        messages.append(
            {"role": "assistant", "content": f"reading module_{i}", "tool_calls": [call]}
        )
        messages.append(
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"def fn_{i}(): pass\n" * 40}
        )
    messages.append({"role": "assistant", "content": "done"})
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in messages))
    row = run_policy(load_trace(path), "progressive", 3_000, MessageCounter())
    assert row is not None and row.summarizer_calls > 0
    assert row.summarizer_tokens > 0


def test_a_bounded_request_is_charged_for_what_it_sends_not_its_sources() -> None:
    counter = TokenCounter()
    whole = request(2_000)
    short_text = "I will fix src/app.py by calling parse_header first. " * 20
    short_unit = Unit((Item({"role": "assistant", "content": short_text}, 240),), "round", 0)
    bounded = msgspec.structs.replace(whole, units=(short_unit,), sources=whole.units)
    charged = Charged(HeuristicSummarizer(), counter)
    charged.summarize(bounded)
    full = Charged(HeuristicSummarizer(), counter)
    full.summarize(whole)
    assert charged.tokens_in < full.tokens_in // 10  # what the LLM would be sent
    sent, _ = LiteLLMSummarizer("x", max_input_tokens=200_000).messages(bounded)
    assert abs(charged.tokens_in - counter.count_messages(sent)) <= 5
