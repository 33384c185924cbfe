"""``Policy.summary_wait`` through ``Session``: by default a render waits for the summary it
needs, so the prompts never depend on how long a summary takes (replayed with a summarizer
that is done ahead and with one that is not, they are the same prompts); with ``never``
no render waits, and each receipt says what happened. A session's receipts also carry what
the provider reported for each call."""

from __future__ import annotations

import threading
from typing import Any

from context import Anchors, Policy, SummaryRequest, SummaryResult
from graph import seeded_ids
from openprogram import ModelResponse, Session, Usage
from openprogram.testing import TestModel


class HeldSummarizer:
    """Summaries on the prefetcher's worker; each waits for ``gate`` unless ``free``."""

    name = "held"
    proactive = True

    def __init__(self, *, free: bool) -> None:
        self.gate = threading.Event()
        if free:
            self.gate.set()
        self.started = self.finished = 0
        self.done = threading.Condition()

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        with self.done:
            self.started += 1
        self.gate.wait(120)
        ids = request.node_ids
        with self.done:
            self.finished += 1
            self.done.notify_all()
        return SummaryResult(
            anchors=Anchors(execution_progress=(f"worked through {ids[0]}…{ids[-1]}",)),
            summarizer=self.name,
        )

    def settle(self) -> bool:
        with self.done:
            return self.done.wait_for(lambda: self.finished >= self.started, 60)


PROGRESSIVE = {"preset": "progressive", "budget": 8_000, "facts": 25, "turns": 45}
"""A progressive session whose soft step (summarize_half) acts at turn 37, its compact at 52."""


def _turns(
    summarizer: HeldSummarizer,
    wait: str,
    *,
    settle: bool,
    turns: int = 40,
    preset: str = "claude-code",
    budget: int = 3_000,
    facts: int = 60,
    tiers: list[str] | None = None,
    **overrides: Any,
) -> tuple[list[list[dict[str, Any]]], list[str]]:
    prompts, said = [], []
    policy = Policy.named(preset, summary_wait=wait, **overrides)
    replies = [
        f"Step {n} found: " + " ".join(f"fact_{n}_{k}" for k in range(facts)) for n in range(turns)
    ]
    model = TestModel(replies)
    with (
        seeded_ids("summary-wait"),
        Session(
            ":memory:", model=model, policy=policy, budget=budget, summarizer=summarizer
        ) as session,
    ):
        for n in range(turns):
            if settle:
                assert summarizer.settle()
            session.llm(f"Go on with step {n}.")
            prompt, receipt = session.last_prompt(), session.receipt()
            assert prompt is not None and receipt is not None
            assert receipt.tokens <= receipt.budget
            prompts.append(prompt.messages)
            said.append(receipt.summary)
            if n == turns // 2:
                summarizer.gate.set()
        if tiers is not None:
            tiers.extend(record.tier for record in session.engine.records())
    return prompts, said


def test_by_default_the_prompts_do_not_depend_on_when_a_summary_is_done() -> None:
    ready, said_ready = _turns(HeldSummarizer(free=True), "always", settle=True)
    # not settled: whether a summary computed ahead is done when needed is up to the worker
    held_prompts, said_held = _turns(HeldSummarizer(free=True), "always", settle=False)
    assert "went without" not in said_ready + said_held and "adopted" in said_ready
    assert any("[Context Compaction]" in str(m["content"]) for m in ready[-1])
    assert held_prompts == ready


def test_with_never_no_render_waits_and_the_next_adopts_the_summary() -> None:
    held = HeldSummarizer(free=False)
    prompts, said = _turns(held, "never", settle=False)
    went = said.index("went without")
    assert went < len(said) // 2  # while every summary was held: the render did not wait
    assert "adopted" in said[went:]
    assert "waited" not in said
    assert any("[Context Compaction]" in str(m["content"]) for m in prompts[-1])


def test_progressive_prepares_its_soft_step_ahead_and_the_prompts_do_not_change() -> None:
    ready, said = _turns(HeldSummarizer(free=True), "always", settle=True, **PROGRESSIVE)  # type: ignore[arg-type]
    # the soft step's summary was prepared ahead: done when the render needed it
    assert said[37] == "adopted" and "Context Compaction" in str(ready[37])
    held, _ = _turns(HeldSummarizer(free=True), "always", settle=False, **PROGRESSIVE)  # type: ignore[arg-type]
    assert held == ready  # whether it was done in time is up to the worker
    asked_then, said_then = _turns(
        HeldSummarizer(free=True),
        "always",
        settle=True,
        proactive_share=None,
        **PROGRESSIVE,  # type: ignore[arg-type]
    )
    assert said_then[37] == "waited" and asked_then == ready  # the same span, asked now


def test_progressive_with_never_adopts_its_soft_steps_prepared_summary() -> None:
    held = HeldSummarizer(free=False)
    prompts, said = _turns(held, "never", settle=False, **PROGRESSIVE)  # type: ignore[arg-type]
    # held until turn 22: the soft step's summary, started ahead, is done before turn 37
    assert said[37] == "adopted" and "Context Compaction" in str(prompts[37])
    assert "waited" not in said


def test_a_prepared_span_too_small_to_compact_does_not_hold_the_compaction_back() -> None:
    # progressive compacts once the new rounds hold 30% of the budget; a span prepared
    # ahead held less, and the compaction waited for it until the emergency step cut
    tiers: list[str] = []
    _turns(HeldSummarizer(free=True), "always", settle=True, turns=14, preset="progressive",
           tiers=tiers)  # fmt: skip
    assert "compact" in tiers and "emergency" not in tiers


def test_a_sessions_receipt_carries_the_providers_usage() -> None:
    usage = Usage(input_tokens=500, output_tokens=9, cached_tokens=300, cache_written=50)
    reply = ModelResponse(message={"role": "assistant", "content": "Paris."}, usage=usage)
    with Session(":memory:", model=TestModel([reply])) as session:
        session.llm("Capital of France?")
        receipt = session.receipt()
    assert receipt is not None and receipt.usage is not None
    assert receipt.usage.cached_input_tokens == 300 and receipt.usage.cache_write_tokens == 50
    assert receipt.usage.uncached_input_tokens == 200 and receipt.usage.output_tokens == 9
