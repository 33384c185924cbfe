"""The "what the agent concluded" section: the agent's own statements, ranked by later use,
bounded, kept across re-compaction, in the heuristic summary and the LLM summarizer's prompt."""

from __future__ import annotations

from pathlib import Path

import pytest
from _context_helpers import policy, start, tool_round
from _layer_helpers import NOW, clock
from _summary_helpers import call, units_from
from hypothesis import given, settings
from hypothesis import strategies as st

from context import (
    Anchors,
    ContextEngine,
    HeuristicSummarizer,
    LiteLLMSummarizer,
    Policy,
    PolicyError,
    SummaryRequest,
    SummaryResult,
    TokenCounter,
    Unit,
)
from graph import ConversationGraph

COUNTER = TokenCounter()
BUG = "The bug is in src/export.py: parse_row drops the last field; next: patch it."


def export_units(*extra: str) -> tuple[Unit, ...]:
    """The agent reads src/export.py, concludes where the bug is, then works on, naming
    parse_row again; ``extra`` are later statements of its own."""
    read = {
        "role": "assistant",
        "content": "Let me look at the exporter.",
        "tool_calls": [call("c1", "Read", file_path="src/export.py")],
    }
    printed = {"role": "tool", "tool_call_id": "c1", "content": "def parse_row(line):\n  ..."}
    concluded = {"role": "assistant", "content": BUG}
    edit = {
        "role": "assistant",
        "content": "Patching it now.",
        "tool_calls": [call("c2", "Edit", file_path="src/export.py", old="parse_row(line)")],
    }
    done = {"role": "tool", "tool_call_id": "c2", "content": "edited"}
    later = [{"role": "assistant", "content": text} for text in extra]
    return (
        units_from([(read, None), (printed, None)]),
        units_from([(concluded, None)]),
        units_from([(edit, None), (done, None), *((m, None) for m in later)]),
    )


def section_tokens(result: SummaryResult) -> int:
    return COUNTER.count_text("\n".join(f"- {item}" for item in result.concluded))


def test_the_heuristic_summary_keeps_what_the_agent_concluded() -> None:
    request = SummaryRequest(kind="compact", units=export_units("All done, thanks."), task="Fix")
    result = HeuristicSummarizer().summarize(request)
    assert result.concluded[0] == BUG
    text = result.text()
    assert f"## What the Agent Concluded\n- {BUG}" in text
    assert "Let me look at the exporter." not in result.concluded  # chatter naming nothing
    assert "parse_row" not in result.identifiers  # the statement shows it already
    assert "parse_row" in text


def test_statements_naming_what_is_used_later_rank_first() -> None:
    unused = "I think the loader in src/unused_module.py is fine and should stay as it is."
    units = export_units()
    early = units_from([({"role": "assistant", "content": unused}, None)])
    request = SummaryRequest(
        kind="compact", units=(early, *units), task="Fix", conclusion_tokens=40
    )
    result = HeuristicSummarizer().summarize(request)
    assert result.concluded == (BUG,)  # the room holds one: the one whose names recur
    roomy = HeuristicSummarizer().summarize(
        SummaryRequest(kind="compact", units=(early, *units), task="Fix")
    )
    assert roomy.concluded[:2] == (BUG, unused)


def test_zero_turns_the_section_off_and_a_negative_bound_is_refused() -> None:
    request = SummaryRequest(kind="compact", units=export_units(), conclusion_tokens=0)
    result = HeuristicSummarizer().summarize(request)
    assert result.concluded == ()
    assert "What the Agent Concluded" not in result.text()
    assert Policy().conclusion_tokens > 0
    assert Policy.claude_code().conclusion_tokens > 0
    assert Policy.progressive().conclusion_tokens == 0
    with pytest.raises(
        PolicyError, match="conclusion_tokens: Input should be greater than or equal to 0"
    ):
        Policy(conclusion_tokens=-1)


_WORDS = st.sampled_from(
    [
        "found",
        "the bug",
        "src/a_b.py",
        "parse_row",
        "next",
        "because",
        "fixed",
        "CamelName",
        "pkg/mod.py",
        "so",
        "it",
        "is",
        "drops",
        "field",
        "will",
        "use",
        "data_frame",
    ]
)
_SENTENCE = st.lists(_WORDS, min_size=3, max_size=40).map(lambda ws: " ".join(ws) + ".")


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(st.lists(_SENTENCE, min_size=1, max_size=6).map(" ".join), max_size=12),
    bound=st.integers(min_value=0, max_value=200),
    max_tokens=st.integers(min_value=60, max_value=2_000),
    old=st.lists(_SENTENCE, max_size=8),
)
def test_the_section_never_exceeds_its_bound(
    texts: list[str], bound: int, max_tokens: int, old: list[str]
) -> None:
    units = tuple(units_from([({"role": "assistant", "content": t}, None)]) for t in texts)
    previous = SummaryResult(Anchors(user_intent=("Fix",)), concluded=tuple(old))
    request = SummaryRequest(
        kind="compact",
        units=units,
        task="Fix",
        previous=previous,
        conclusion_tokens=bound,
        max_tokens=max_tokens,
    )
    result = HeuristicSummarizer().summarize(request)
    assert section_tokens(result) <= bound
    assert COUNTER.count_text(result.text()) <= max_tokens


def test_recompaction_keeps_the_old_conclusions_still_in_use() -> None:
    first = HeuristicSummarizer().summarize(
        SummaryRequest(kind="compact", units=export_units(), task="Fix")
    )
    assert BUG in first.concluded
    stale = "I decided the cache in src/cache_layer.py is not the cause, so I left it."
    previous = SummaryResult(
        first.anchors, first.prose, first.identifiers, concluded=(stale, *first.concluded)
    )
    rerun = {
        "role": "assistant",
        "content": "Running the tests again.",
        "tool_calls": [call("c9", "Bash", command="pytest -k parse_row")],
    }
    printed = {"role": "tool", "tool_call_id": "c9", "content": "1 passed"}
    chatter = {"role": "assistant", "content": "Okay, I will keep going with the work then."}
    newer = (units_from([(rerun, None), (printed, None)]), units_from([(chatter, None)]))
    bound = COUNTER.count_text(f"- {BUG}") + 2
    merged = HeuristicSummarizer().summarize(
        SummaryRequest(
            kind="compact", units=newer, task="Fix", previous=previous, conclusion_tokens=bound
        )
    )
    # parse_row came up again in the new rounds: that old conclusion outranks the stale one
    # listed first and the newer chatter
    assert merged.concluded == (BUG,)
    roomy = HeuristicSummarizer().summarize(
        SummaryRequest(kind="compact", units=newer, task="Fix", previous=previous)
    )
    assert roomy.concluded[0] == BUG and stale in roomy.concluded


REPLY = """\
## Anchors
### User Intent
- Fix the exporter
### Execution Progress
- read src/export.py
### Key Decisions
- N/A
### Tried Solutions
- N/A
### Next Steps
- patch parse_row
## What the Agent Concluded
- The bug is in src/export.py: parse_row drops the last field.
## Summary
Found the bug."""


def test_the_llm_prompt_asks_for_the_section_and_the_reply_keeps_it() -> None:
    summarizer = LiteLLMSummarizer("gpt-4o", mock_response=REPLY)
    request = SummaryRequest(kind="compact", units=export_units(), task="Fix")
    prompt = summarizer.messages(request)[0][-1]["content"]
    assert "## What the Agent Concluded\n- <one line per conclusion the agent itself" in prompt
    assert (
        f"decisions and findings before chatter; at most {request.conclusion_tokens} tokens"
        in prompt
    )
    result = summarizer.summarize(request)
    assert result.concluded == ("The bug is in src/export.py: parse_row drops the last field.",)
    assert "## What the Agent Concluded" in result.text()
    off = SummaryRequest(kind="compact", units=export_units(), task="Fix", conclusion_tokens=0)
    assert "What the Agent Concluded" not in summarizer.messages(off)[0][-1]["content"]


def test_an_incremental_llm_prompt_carries_the_old_conclusions() -> None:
    previous = SummaryResult(Anchors(user_intent=("Fix",)), concluded=(BUG,))
    request = SummaryRequest(kind="compact", units=export_units(), task="Fix", previous=previous)
    prompt = LiteLLMSummarizer("gpt-4o").messages(request)[0][-1]["content"]
    assert "<previous-summary>\n## Anchors" in prompt
    assert f"## What the Agent Concluded\n- {BUG}\n</previous-summary>" in prompt
    assert "Keep the previous conclusions whose names the new conversation uses again" in prompt


def test_a_compaction_shows_the_section_and_the_next_one_keeps_it(tmp_path: Path) -> None:
    g = ConversationGraph.memory("concluded")
    start(g, task="Fix the exporter.")
    g.append({"role": "assistant", "content": BUG}, at=NOW)
    for i in range(30):
        g.append({"role": "user", "content": f"go on with parse_row, step {i}"}, at=NOW)
        tool_round(g, [("Bash", f"ran {i}\n" * 200)], prefix=f"c{i}", content=f"ran {i}", at=NOW)
    pol = policy(tmp_path, cascade=("compact", "emergency"), always=())
    first = ContextEngine(g, pol, budget=6_000, clock=clock).render()
    shown = "\n".join(str(m.get("content")) for m in first.messages)
    assert f"## What the Agent Concluded\n- {BUG}" in shown
    for i in range(30, 60):
        g.append({"role": "user", "content": f"go on with parse_row, step {i}"}, at=NOW)
        tool_round(g, [("Bash", f"ran {i}\n" * 200)], prefix=f"c{i}", content=f"ran {i}", at=NOW)
    again = ContextEngine(g, pol, budget=6_000, clock=clock).render()
    shown = "\n".join(str(m.get("content")) for m in again.messages)
    assert shown.count("[Context Compaction]") == 1
    assert f"## What the Agent Concluded\n- {BUG}" in shown
