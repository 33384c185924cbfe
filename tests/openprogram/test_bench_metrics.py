"""Bench figures on small traces worked out by hand (numbers in the comments)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rich.console import Console

from openprogram.bench import (
    BenchError,
    TraceMetrics,
    Turn,
    compute_metrics,
    estimate_errors,
    format_table,
    identifiers,
    percentile,
    reported_input,
    to_jsonl,
    tool_pair_problems,
)

Msg = dict[str, Any]


def count(m: Msg) -> int:
    return len(str(m.get("content") or ""))


def sys_(text: str) -> Msg:
    return {"role": "system", "content": text}


def user(text: str) -> Msg:
    return {"role": "user", "content": text}


def asst(text: str | None, *calls: tuple[str, str, str]) -> Msg:
    m: Msg = {"role": "assistant", "content": text}
    if calls:
        m["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
    return m


def tool(call_id: str, text: str) -> Msg:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def turn(prompt: list[Msg], history_tokens: int, ms: float = 1.0, **kw: Any) -> Turn:
    return Turn(
        prompt=prompt,
        prompt_tokens=sum(count(m) for m in prompt),
        history_tokens=history_tokens,
        assistant=kw.get("assistant", asst("ok")),
        history=kw.get("history", []),
        ms=ms,
    )


def measure(turns: list[Turn], first: str = "hello", budget: int = 10) -> TraceMetrics:
    return compute_metrics(
        turns, trace="t", policy="p", first_user_text=first, budget=budget, count_message=count
    )


# -- the 3-turn trace ------------------------------------------------------------------------
# S = "sys" (3), U = "hello" (5), A = "hi!" (3), U2 = "again" (5), X = "summary" (7)
# turn 1: [S, U]          tokens 8,  history 5   reuse 0
# turn 2: [S, U, A, U2]   tokens 16, history 16  reuse S+U = 8   (new but equal dicts)
# turn 3: [S, X, U2]      tokens 15, history 30  reuse S = 3
# prefix_reuse = (0 + 8 + 3) / (8 + 16 + 15) = 11/39; budget 10: over = 2 (16, 15)
# util over turns 2, 3 = (1.6 + 1.5) / 2 = 1.55; task kept: "hello" in turn 2, not turn 3 = 0.5


def three_turns() -> list[Turn]:
    return [
        turn([sys_("sys"), user("hello")], 5, ms=3.0),
        turn([sys_("sys"), user("hello"), asst("hi!"), user("again")], 16, ms=1.0),
        turn([sys_("sys"), user("summary"), user("again")], 30, ms=2.0),
    ]


def test_three_turn_trace_by_hand() -> None:
    m = measure(three_turns())
    assert m.turns == 3
    assert m.prefix_reuse == pytest.approx(11 / 39)
    assert m.over_budget == 2
    assert m.util == pytest.approx(1.55)
    assert m.task_kept == pytest.approx(0.5)
    assert m.request_kept is None  # the histories hold no user message
    assert m.sent_tokens == 39
    assert m.bad_pairs == 0
    assert (m.ms_p50, m.ms_p99) == (2.0, 3.0)  # nearest rank on [1, 2, 3]
    assert m.ref_recall is None  # no candidate identifiers at all


def test_task_kept_uses_first_80_chars() -> None:
    first = "x" * 79 + "Y" + "z" * 20  # the 80th character is Y
    keeps = turn([user(first[:80] + " and the rest cut")], 100)
    loses = turn([user(first[:79])], 100)
    assert measure([keeps], first=first).task_kept == 1.0
    assert measure([loses], first=first).task_kept == 0.0
    # history under budget: the turn does not count, so there is no figure
    assert measure([turn([user("a")], 5)], first=first).task_kept is None


def test_request_kept_looks_for_the_latest_user_message() -> None:
    later = "Now write the fix for src/export.py." + " detail" * 20
    history = [user("Find the bug."), asst("found"), user(later), asst("on it")]
    keeps = turn([user("Find the bug."), user(later[:80])], 100, history=history)
    loses = turn([user("Find the bug."), user("[10 earlier round(s) were removed]")], 100,
                 history=history)  # fmt: skip
    assert measure([keeps, loses], first="Find the bug.").request_kept == 0.5
    assert measure([keeps, loses], first="Find the bug.").task_kept == 1.0


def test_task_kept_searches_tool_call_arguments() -> None:
    prompt = [asst(None, ("c1", "note", '{"text": "hello"}')), tool("c1", "done")]
    assert measure([turn(prompt, 100)]).task_kept == 1.0


def test_identifiers_classification() -> None:
    text = "foo_bar src/app.py camelCase os.path plainword short CamelCase HTTPServer"
    assert identifiers(text) == {"foo_bar", "src/app.py", "camelCase", "os.path", "CamelCase"}
    # trailing . : - / are stripped, then the length rule applies again
    assert identifiers("see src/dir/. and ab.cd. and pkg.mod:") == {"src/dir", "pkg.mod"}


def test_ref_recall_pooled_by_hand() -> None:
    h0 = [user("look at foo_bar src/app.py camelCase os.path plainword")]
    a1 = asst(
        "edit foo_bar in src/app.py with camelCase and os.path, plainword",
        ("c1", "write", '{"path": "src/app.py", "new_thing": "brandNew"}'),
    )
    # turn 1 candidates: foo_bar, src/app.py, camelCase, os.path (new_thing, brandNew are not
    # in history yet; plainword is no identifier). Prompt holds foo_bar and src/app.py: 2/4.
    p1 = [user("foo_bar and src/app.py only")]
    h1 = [*h0, a1, tool("c1", "ok")]
    a2 = asst("now brandNew, new_thing and foo_bar; unseen_name too")
    # turn 2 candidates: brandNew, new_thing, foo_bar (unseen_name is not in history): all 3 in
    # the prompt, brandNew only inside a tool call's arguments. Pooled: (2 + 3) / (4 + 3).
    p2 = [user("foo_bar new_thing"), asst(None, ("c2", "x", '"brandNew"')), tool("c2", "")]
    m = measure([turn(p1, 0, assistant=a1, history=h0), turn(p2, 0, assistant=a2, history=h1)])
    assert m.ref_recall == pytest.approx(5 / 7)


def test_bad_pairs_counts_turns() -> None:
    good = [user("q"), asst(None, ("c1", "f", "{}")), tool("c1", "r")]
    bad = [user("q"), tool("c1", "r")]
    assert measure([turn(good, 0), turn(bad, 0), turn(bad, 0)]).bad_pairs == 2


def test_empty_trace_and_bad_budget() -> None:
    m = measure([])
    assert (m.turns, m.sent_tokens, m.over_budget) == (0, 0, 0)
    assert m.prefix_reuse is m.util is m.task_kept is m.ms_p50 is m.ms_p99 is None
    with pytest.raises(BenchError):
        measure([], budget=0)


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(10, 0, -1)]
    assert percentile(values, 50) == 5.0
    assert percentile(values, 99) == 10.0
    assert percentile(values, 10) == 1.0
    assert percentile([], 50) is None


# -- tool pairs --------------------------------------------------------------------------------


def test_tool_pairs_valid_in_any_result_order() -> None:
    msgs = [
        sys_("s"),
        user("q"),
        asst(None, ("c1", "f", "{}"), ("c2", "g", "{}")),
        tool("c2", "b"),
        tool("c1", "a"),
        asst("done"),
    ]
    assert tool_pair_problems(msgs) == []


def test_tool_pairs_orphan_result() -> None:
    problems = tool_pair_problems([user("q"), tool("c9", "r")])
    assert len(problems) == 1
    assert "'c9'" in problems[0] and "no earlier call" in problems[0]


def test_tool_pairs_missing_result() -> None:
    msgs = [user("q"), asst(None, ("c1", "f", "{}"), ("c2", "g", "{}")), tool("c1", "a")]
    problems = tool_pair_problems([*msgs, user("next")])
    assert len(problems) == 1
    assert "'c2'" in problems[0] and "no result" in problems[0]
    assert len(tool_pair_problems(msgs)) == 1  # still missing at the end


def test_tool_pairs_interleaved_user_message() -> None:
    msgs = [user("q"), asst(None, ("c1", "f", "{}")), user("hey"), tool("c1", "a")]
    problems = tool_pair_problems(msgs)
    assert len(problems) == 2
    assert "no result before message 2" in problems[0]
    assert "separated" in problems[1]


def test_tool_pairs_duplicate_result() -> None:
    msgs = [asst(None, ("c1", "f", "{}")), tool("c1", "a"), tool("c1", "a")]
    assert tool_pair_problems(msgs) == ["message 2: second result for tool call 'c1'"]


# -- presentation ------------------------------------------------------------------------------


def test_to_json_and_jsonl_key_order() -> None:
    m = measure(three_turns())
    keys = [
        "trace", "policy", "turns", "budget", "over_budget", "bad_pairs", "task_kept",
        "request_kept", "ref_recall", "prefix_reuse", "util", "sent_tokens", "summarizer_calls",
        "summarizer_tokens", "ms_p50", "ms_p99", "summarizer_ms", "cost", "cost_vs_native",
            "cost_vs_harness", "emergency_share",
    ]  # fmt: skip
    assert list(m.to_json()) == keys
    lines = to_jsonl([m, m]).splitlines()
    assert len(lines) == 2
    assert list(json.loads(lines[0])) == keys


def test_format_table_rows_and_means() -> None:
    over = measure(three_turns())
    fine = compute_metrics(
        [turn([user("hello")], 1)],
        trace="u",
        policy="p",
        first_user_text="hello",
        budget=100,
        count_message=count,
    )
    table = format_table([over, fine])
    assert table.row_count == 3  # two traces, one mean row
    console = Console(record=True, width=250)
    console.print(table)
    text = console.export_text()
    assert "1/2 traces over" in text
    assert "50.0%" in text  # task kept: mean skips the trace with no figure
    assert "—" in text


def test_estimate_errors_raw_and_anchored() -> None:
    assert estimate_errors([]) == (None, None)
    # a steady 1.25 provider/estimate ratio: anchoring removes the error after the first turn
    raw, anchored = estimate_errors([(1000, 1250), (2000, 2500), (4000, 5000)])
    assert raw == pytest.approx(0.2)
    assert anchored == pytest.approx(0.2 / 3)
    # reports of zero are no evidence and are not measured
    assert estimate_errors([(10, 0), (100, 100)]) == (0.0, 0.0)
    # the anchor's clamp: a 10x report moves the ratio to 2 at most
    raw, anchored = estimate_errors([(100, 1000), (100, 1000)])
    assert (raw, anchored) == (pytest.approx(0.9), pytest.approx((0.9 + 0.8) / 2))


def test_reported_input_reads_both_usage_shapes() -> None:
    ours = {"input": 3, "cache_read": 27_797, "cache_creation": 932, "output": 1}
    assert reported_input({"usage": ours}) == 28_732
    assert reported_input({"usage": {"prompt_tokens": 1465, "completion_tokens": 205}}) == 1465
    assert reported_input({}) is None
    assert reported_input({"usage": "lots"}) is None
    assert reported_input({"usage": {"input": "3"}}) is None
    assert reported_input({"usage": {"input": 0}}) is None


def test_usage_figures_appear_only_in_an_anchored_row() -> None:
    plain = measure(three_turns())
    assert "usage_mape" not in plain.to_json()
    anchored = compute_metrics(
        three_turns(),
        trace="t",
        policy="none",
        first_user_text="task",
        budget=100,
        count_message=lambda m: 1,
        usage=[(100, 120), (200, 240)],
    )
    row = anchored.to_json()
    assert (row["usage_turns"], row["usage_mape"]) == (2, pytest.approx(1 / 6))
    assert row["usage_mape_anchored"] == pytest.approx(1 / 12)
    shown = Console(record=True, width=250)
    shown.print(format_table([anchored]))
    text = shown.export_text()
    assert "est. error" in text and "anchored" in text  # the header, wrapped or not
    assert text.count("16.7% → 8.3%") == 2  # the row and its policy's mean
    hidden = Console(record=True, width=250)
    hidden.print(format_table([plain]))
    assert "est. error" not in hidden.export_text()
