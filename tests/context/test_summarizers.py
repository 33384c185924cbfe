"""The heuristic summarizer and identifier ranking on a small realistic session."""

from __future__ import annotations

import msgspec
import pytest
from _summary_helpers import TASK, call, request_of, session, units_from
from hypothesis import given, settings
from hypothesis import strategies as st
from inline_snapshot import snapshot

from context import (
    ANCHOR_TITLES,
    Anchors,
    HeuristicSummarizer,
    Summarizer,
    SummaryRequest,
    SummaryResult,
    TokenCounter,
    parse_summary,
    rank_identifiers,
)

COUNTER = TokenCounter()


def tokens(text: str) -> int:
    return COUNTER.count_text(text)


def test_heuristic_anchors_from_a_session() -> None:
    summarizer = HeuristicSummarizer()
    assert isinstance(summarizer, Summarizer)
    result = summarizer.summarize(request_of(session(), max_tokens=1_000))
    assert (result.summarizer, result.tokens_in, result.tokens_out) == ("heuristic", 0, 0)
    assert result.text() == snapshot(
        """\
## Anchors
### User Intent
- Fix the failing test in tests/test_parse.py: parse_header crashes on an empty line. Keep the public API of src/app/parse.py unchanged.
- then: Try the apply_patch function instead.
### Execution Progress
- apply_patch(src/app/parse.py) → `patched src/app/parse.py (1 hunk)`
- Read(src/app/parse.py) → 3 lines
### Key Decisions
- I decided to return None for an empty line instead of raising.
- I will read src/app/parse.py first.
### Tried Solutions
- Bash(pytest -q tests/test_parse.py) failed: `FAILED tests/test_parse.py::test_empty - ValueError: not enough values`
- Edit(src/app/parse.py) failed: `permission denied: src/app/parse.py is read-only`
- run_linter(ruff check src) failed: `RuntimeError: ruff found E501 in src/app/parse.py`
### Next Steps
- Next I will rerun pytest -q tests/test_parse.py, then fix the E501 warning in src/app/parse.py.
## What the Agent Concluded
- The bug is in parse_header: split(':') fails on an empty line.
## Summary
Covered 5 rounds: 3 tool calls (Read, Bash, Edit), 2 function calls, 3 failed.
## Identifiers
src/app/parse.py, tests/test_parse.py, apply_patch, E501, run_linter, raw.split, tests/test_parse.py::test_empty, ValueError, RuntimeError\
"""
    )
    assert parse_summary(result.text()) == (result.anchors, result.prose)


def test_heuristic_reads_the_failure_from_the_node_not_only_the_text() -> None:
    from graph import ConversationGraph

    g = ConversationGraph.memory("flag")
    g.append({"role": "user", "content": "Deploy."})
    g.append({"role": "assistant", "content": None, "tool_calls": [call("d1", "deploy")]})
    g.append({"role": "tool", "tool_call_id": "d1", "content": "quota", "is_error": True})
    result = HeuristicSummarizer().summarize(request_of(g, task="Deploy."))
    assert result.anchors.tried_solutions == ("deploy failed: `quota`",)
    assert result.anchors.execution_progress == ()


def test_heuristic_is_deterministic() -> None:
    first = HeuristicSummarizer().summarize(request_of(session()))
    second = HeuristicSummarizer().summarize(request_of(session()))
    assert first.text() == second.text()
    assert msgspec.json.encode(first) == msgspec.json.encode(second)


def long_session_request(rounds: int, **fields: object) -> SummaryRequest:
    units = []
    for i in range(rounds):
        path = f"src/pkg_{i}/module_{i}.py"
        assistant = {
            "role": "assistant",
            "content": f"I will use helper_{i} instead of the old loader. Next I will check {path}.",
            "tool_calls": [call(f"c{i}", "Bash", command=f"python -m check_{i} {path}")],
        }
        output = "Traceback (most recent call last):\n" if i % 3 == 0 else "ok\n"
        output += f"line {i}: value_{i} = compute_{i}()\n" * 20
        tool = {"role": "tool", "tool_call_id": f"c{i}", "content": output}
        units.append(units_from([(assistant, None), (tool, None)]))
    return SummaryRequest(kind="compact", units=tuple(units), task=TASK, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("max_tokens", [60, 120, 300, 800])
def test_heuristic_fits_max_tokens_and_keeps_every_section(max_tokens: int) -> None:
    result = HeuristicSummarizer().summarize(long_session_request(40, max_tokens=max_tokens))
    text = result.text()
    assert tokens(text) <= max_tokens
    for title in ANCHOR_TITLES.values():
        assert f"### {title}\n- " in text
    assert result.anchors.user_intent


def test_heuristic_below_the_skeleton_still_writes_every_section() -> None:
    result = HeuristicSummarizer().summarize(long_session_request(5, max_tokens=5))
    assert all(f"### {title}" in result.text() for title in ANCHOR_TITLES.values())
    assert result.identifiers == ()


def test_identifiers_are_capped_at_identifier_tokens() -> None:
    request = long_session_request(60, max_tokens=5_000)
    result = HeuristicSummarizer().summarize(request)
    assert request.identifier_tokens == 80
    assert len(result.identifiers) > 10
    assert tokens(", ".join(result.identifiers)) <= 80
    none = HeuristicSummarizer().summarize(long_session_request(3, identifier_tokens=0))
    assert none.identifiers == () and "## Identifiers" not in none.text()


def test_rank_identifiers_orders_by_use_then_first_appearance() -> None:
    texts = [
        "Edit src/app/parse.py and tests/test_parse.py",
        "parse_header raised ValueError in src/app/parse.py",
        "HTTP 504 from api.example.com/v1; ruff says E501; errno ENOENT; ERR_X",
        "node 01JF3ZQ8W5M2N4P6R8T0V2X4Y6, call_9f8e7d6c5b4a3f2e, sha a3f9c2e1b7d4e5f60718, 12345",
    ]
    assert rank_identifiers(texts, COUNTER, 200) == snapshot(
        (
            "src/app/parse.py",
            "tests/test_parse.py",
            "parse_header",
            "ValueError",
            "HTTP 504",
            "api.example.com/v1",
            "E501",
            "ENOENT",
            "ERR_X",
        )
    )
    assert rank_identifiers(texts, COUNTER, 0) == ()
    capped = rank_identifiers(texts, COUNTER, 8)
    assert capped[0] == "src/app/parse.py" and tokens(", ".join(capped)) <= 8


def test_rank_identifiers_of_a_big_text_stays_under_the_cap() -> None:
    text = " ".join(f"pkg_{i}/file_{i}.py" for i in range(2_000))
    ranked = rank_identifiers([text], COUNTER, 80)
    assert tokens(", ".join(ranked)) <= 80
    assert ranked[0] == "pkg_0/file_0.py"


def test_identifiers_named_only_in_tool_call_arguments_count() -> None:
    assistant = {
        "role": "assistant",
        "content": "Reading it.",
        "tool_calls": [call("r1", "Read", file_path="lib/only_in_args.py")],
    }
    tool = {"role": "tool", "tool_call_id": "r1", "content": "x = 1"}
    request = SummaryRequest(kind="segment", units=(units_from([(assistant, None), (tool, None)]),))
    result = HeuristicSummarizer().summarize(request)
    assert result.identifiers == ("lib/only_in_args.py",)
    assert "file_path" not in result.identifiers


def test_identifiers_the_agent_wrote_outrank_those_only_outputs_repeat() -> None:
    assistant = {
        "role": "assistant",
        "content": "The fix goes in lib/settings_loader.py.",
        "tool_calls": [call("r1", "Grep", pattern="load_settings")],
    }
    tool = {"role": "tool", "tool_call_id": "r1", "content": "lib/noisy_module.py\n" * 2}
    request = SummaryRequest(kind="segment", units=(units_from([(assistant, None), (tool, None)]),))
    result = HeuristicSummarizer().summarize(request)
    # two uses in an output count less than one the agent wrote (AUTHORED_WEIGHT, 3)
    assert result.identifiers[:2] == ("lib/settings_loader.py", "load_settings")
    assert result.identifiers[2] == "lib/noisy_module.py"


def previous_summary() -> SummaryResult:
    text = """\
## Anchors
### User Intent
- Fix parse_header
### Execution Progress
- N/A
### Key Decisions
- use chi for routing: it is the fastest
### Tried Solutions
- N/A
### Next Steps
- write the old plan down
## Summary
We started on the parser."""
    anchors, prose = parse_summary(text)
    return SummaryResult(anchors, prose, ("old/router.go", "src/app/parse.py"), summarizer="x")


def test_heuristic_merges_with_the_previous_summary() -> None:
    previous = previous_summary()
    assert previous.anchors.execution_progress == ()
    result = HeuristicSummarizer().summarize(
        request_of(session(), previous=previous, max_tokens=2_000)
    )
    anchors = result.anchors
    assert anchors.key_decisions[0] == "use chi for routing: it is the fastest"
    assert "I decided to return None for an empty line instead of raising." in anchors.key_decisions
    assert anchors.next_steps == (
        "Next I will rerun pytest -q tests/test_parse.py, then fix the E501 warning in "
        "src/app/parse.py.",
    )
    # the intent is a union, in order: what the previous summary said the user asked first
    assert anchors.user_intent[0] == previous.anchors.user_intent[0]
    assert any(item.startswith("Fix the failing test") for item in anchors.user_intent)
    assert not any("N/A" in item for key in ANCHOR_TITLES for item in anchors.get(key))
    assert result.identifiers[0] == "src/app/parse.py"
    assert result.identifiers[-1] == "old/router.go"
    assert result.identifiers.count("src/app/parse.py") == 1
    assert result.prose.endswith("Earlier: We started on the parser.")


def test_merge_keeps_older_next_steps_when_the_new_units_have_none() -> None:
    tool_only = units_from(
        [
            (
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [call("q", "Grep", pattern="x")],
                },
                None,
            ),
            ({"role": "tool", "tool_call_id": "q", "content": "a.py:1: x"}, None),
        ]
    )
    request = SummaryRequest(kind="segment", units=(tool_only,), previous=previous_summary())
    result = HeuristicSummarizer().summarize(request)
    assert result.anchors.next_steps == ("write the old plan down",)
    assert result.anchors.user_intent == ("Fix parse_header",)
    assert result.anchors.execution_progress == ("Grep(x) → `a.py:1: x`",)


def test_merged_summary_under_pressure_drops_the_oldest_union_items_first() -> None:
    old = Anchors(
        key_decisions=tuple(f"old decision number {i} about module_{i}" for i in range(12))
    )
    previous = SummaryResult(old, "", ())
    request = long_session_request(4, previous=previous, max_tokens=200, identifier_tokens=0)
    result = HeuristicSummarizer().summarize(request)
    assert tokens(result.text()) <= 200
    decisions = result.anchors.key_decisions
    assert decisions and "old decision number 0 about module_0" not in decisions
    assert decisions[-1].startswith("I will use helper_")


def test_focus_puts_matching_items_and_identifiers_first() -> None:
    plain = HeuristicSummarizer().summarize(request_of(session(), max_tokens=2_000))
    focused = HeuristicSummarizer().summarize(
        request_of(session(), max_tokens=2_000, focus="the linter run")
    )
    assert plain.anchors.tried_solutions[0].startswith("Bash(")
    assert focused.anchors.tried_solutions[0].startswith("run_linter(ruff check src)")
    assert focused.identifiers[0] == "run_linter"
    assert sorted(focused.anchors.tried_solutions) == sorted(plain.anchors.tried_solutions)


def test_focus_survives_trimming() -> None:
    request = long_session_request(40, max_tokens=150, focus="pkg_37")
    result = HeuristicSummarizer().summarize(request)
    assert tokens(result.text()) <= 150
    assert "pkg_37" in result.anchors.execution_progress[0]
    assert result.identifiers[0] == "src/pkg_37/module_37.py"


def test_odd_messages_do_not_break_the_summarizers() -> None:
    from context import LiteLLMSummarizer

    odd = units_from(
        [
            ({"role": "user", "content": None}, None),
            ({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}, None),
            (
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "Let's go?"}],
                    "tool_calls": [
                        "not a call",
                        {"id": "a", "function": None},
                        {"id": "b", "function": {"name": "Read", "arguments": {"path": "x/y.py"}}},
                        {"id": "c", "function": {"name": "Run", "arguments": "not json"}},
                    ],
                },
                None,
            ),
            ({"role": "tool", "tool_call_id": "b", "content": ""}, None),
            ({"role": "tool", "tool_call_id": "zz", "content": "orphan"}, None),
            ({"role": "developer", "content": "ignored"}, None),
        ]
    )
    request = SummaryRequest(kind="segment", units=(odd,), focus="   ")
    result = HeuristicSummarizer().summarize(request)
    assert result.anchors.execution_progress == snapshot(
        ("Run(not json) → no result yet", "call → no result yet", "Read(x/y.py) → done")
    )
    assert "x/y.py" in result.identifiers
    messages, _ = LiteLLMSummarizer("gpt-4o").messages(request)
    assert "[TOOL CALL Read]\n" in messages[-1]["content"]


@settings(max_examples=40, deadline=None)
@given(
    texts=st.lists(st.text(max_size=300), min_size=1, max_size=6),
    max_tokens=st.integers(min_value=50, max_value=400),
    identifier_tokens=st.integers(min_value=0, max_value=80),
)
def test_heuristic_always_fits_and_is_deterministic(
    texts: list[str], max_tokens: int, identifier_tokens: int
) -> None:
    units = []
    for i, text in enumerate(texts):
        assistant = {
            "role": "assistant",
            "content": text,
            "tool_calls": [call(f"k{i}", "Bash", command=text)],
        }
        tool = {"role": "tool", "tool_call_id": f"k{i}", "content": text * 3}
        units.append(units_from([(assistant, None), (tool, None)]))
    request = SummaryRequest(
        kind="compact",
        units=tuple(units),
        task=texts[0] or None,
        max_tokens=max_tokens,
        identifier_tokens=identifier_tokens,
    )
    first = HeuristicSummarizer().summarize(request)
    assert first.text() == HeuristicSummarizer().summarize(request).text()
    assert tokens(first.text()) <= max_tokens
    assert tokens(", ".join(first.identifiers)) <= identifier_tokens
