"""The bench's replay driver: how traces are found and named, and what anchoring reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from context import ContextEngine
from openprogram.bench import (
    MessageCounter,
    compute_metrics,
    estimate_errors,
    format_table,
    load_trace,
    reported_input,
    run_policy,
    trace_files,
    trace_names,
)
from openprogram.cli import main


def _chat(path: Path, task: str = "task: fix src/app.py") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    messages = [
        {"role": "user", "content": task},
        {"role": "assistant", "content": "looking"},
        {"role": "user", "content": "go on"},
        {"role": "assistant", "content": "done"},
    ]
    path.write_text("".join(json.dumps(m) + "\n" for m in messages))
    return path


ENTIRE = ["d8/7ee3bab4de/0/full.jsonl", "d8/7ee3bab4de/1/full.jsonl", "a1/0c2e55aa01/0/full.jsonl"]


def test_nested_traces_of_one_file_name_get_their_relative_path(tmp_path: Path) -> None:
    for relative in ENTIRE:
        _chat(tmp_path / "sessions" / relative)
    inputs = [tmp_path / "sessions"]
    files = trace_files(inputs)
    assert trace_names(inputs, files) == sorted(ENTIRE)


def test_a_single_file_keeps_its_name_and_files_share_their_common_folder(tmp_path: Path) -> None:
    one = _chat(tmp_path / "x" / "0" / "full.jsonl")
    two = _chat(tmp_path / "x" / "1" / "full.jsonl")
    assert trace_names([one], [one]) == ["full.jsonl"]
    assert trace_names([one, two], [one, two]) == ["0/full.jsonl", "1/full.jsonl"]
    assert trace_names([tmp_path / "x" / "0"], [one]) == ["full.jsonl"]


def test_bench_rows_tell_nested_traces_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for relative in ENTIRE:
        _chat(tmp_path / "sessions" / relative)
    code = main(["bench", str(tmp_path / "sessions"), "--policies", "none", "--json"])
    assert code == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert [row["trace"] for row in rows] == sorted(ENTIRE)


def test_the_table_shows_whole_trace_names() -> None:
    rows = [
        compute_metrics(
            [], trace=name, policy="none", first_user_text="", budget=10, count_message=len
        )
        for name in ENTIRE
    ]
    console = Console(record=True, width=120)
    console.print(format_table(rows))
    first_column = "".join(
        line.split("│")[1].strip() for line in console.export_text().splitlines() if "│" in line
    )
    for name in ENTIRE:
        assert name in first_column


def _claude_session(path: Path, rounds: int = 12) -> Path:
    """A Claude Code session whose responses recorded usage 1.3x our estimate, plus noise."""
    records: list[dict[str, Any]] = []

    def record(rtype: str, uuid: str, message: dict[str, Any]) -> None:
        stamp = f"2026-01-01T10:{len(records):02d}:00Z"
        records.append({"type": rtype, "uuid": uuid, "timestamp": stamp, "message": message})

    record("user", "u0", {"role": "user", "content": "task: fix src/app.py"})
    for i in range(rounds):
        use = {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": f"ls {i}"}}
        record("assistant", f"a{i}", {"id": f"m{i}", "role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": f"line {i}\n" * 150}
        record("user", f"r{i}", {"role": "user", "content": [result]})
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    trace, count = load_trace(path), MessageCounter()
    estimates = [sum(count(m) for m in trace.messages[:position]) for position, _ in trace.turns]
    replies = [r for r in records if r["type"] == "assistant"]
    for n, (reply, estimate) in enumerate(zip(replies, estimates, strict=True)):
        billed = round(estimate * (1.3 + (0.02 if n % 2 else -0.02)))
        reply["message"]["usage"] = {"input_tokens": 7, "cache_read_input_tokens": billed - 7}
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_anchored_replay_reports_the_estimates_error_before_and_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = load_trace(_claude_session(tmp_path / "s.jsonl"))
    count = MessageCounter()
    expected = []
    for position, node in trace.turns:
        reported = reported_input(node.meta)
        if reported is not None:
            expected.append((sum(count(m) for m in trace.messages[:position]), reported))
    assert len(expected) == 12

    told: list[tuple[int, int]] = []
    anchor_usage = ContextEngine.anchor_usage

    def spy(self: ContextEngine, input_tokens: int, *, estimated: int | None = None) -> None:
        assert estimated is not None
        told.append((estimated, input_tokens))
        anchor_usage(self, input_tokens, estimated=estimated)

    monkeypatch.setattr(ContextEngine, "anchor_usage", spy)
    rows = {
        policy: run_policy(trace, policy, 2_000, count, anchored=True, state_dir=tmp_path)
        for policy in ("none", "default")
    }
    raw, anchored = estimate_errors(expected)
    for row in rows.values():
        assert row is not None
        assert (row.usage_turns, row.usage_mape) == (12, raw)
        assert row.usage_mape_anchored == anchored
    assert raw is not None and anchored is not None and anchored < raw
    # the engine heard each report with the estimate of what was really sent (the mapping
    # it learns holds for its own, compacted, renders too)
    assert told == expected
    plain = run_policy(trace, "default", 2_000, count, state_dir=tmp_path)
    assert plain is not None and plain.usage_turns is None


def test_bench_anchored_flag_adds_the_error_fields_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _claude_session(tmp_path / "s.jsonl", rounds=3)
    assert main(["bench", str(path), "--policies", "none", "--anchored", "--json"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["usage_turns"] == 3 and row["usage_mape"] > row["usage_mape_anchored"]
    assert main(["bench", str(path), "--policies", "none", "--json"]) == 0
    assert "usage_mape" not in capsys.readouterr().out
    assert main(["bench", str(path), "--policies", "none", "--anchored"]) == 0
    assert "anchored" in capsys.readouterr().out


def _long_chat(path: Path, rounds: int = 40) -> Path:
    """An OpenAI-format trace of tool rounds long enough that our policies must summarize."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "task: fix src/app.py"}]
    for i in range(rounds):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
        said = f"reading part_{i}.py: " + f"fn_{i} may call the parser wrongly. " * 12
        messages.append({"role": "assistant", "content": said, "tool_calls": [call]})
        messages.append(
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"def fn_{i}(): ...\n" * 60}
        )
    path.write_text("".join(json.dumps(m) + "\n" for m in messages))
    return path


def test_our_presets_report_summarizer_calls_and_cost(tmp_path: Path) -> None:
    trace = load_trace(_long_chat(tmp_path / "long.jsonl"))
    count = MessageCounter()
    rows = {}
    for policy in ("claude-code", "progressive", "none"):
        row = run_policy(trace, policy, 6_000, count, state_dir=tmp_path / policy)
        assert row is not None
        rows[policy] = row
    for policy in ("claude-code", "progressive"):
        row = rows[policy]
        assert row.over_budget == 0 and row.bad_pairs == 0
        assert row.summarizer_calls > 0
        # the heuristic summarizer's summaries are charged as an LLM's would be
        assert row.summarizer_tokens > 0
        assert row.sent_tokens < rows["none"].sent_tokens
    for row in rows.values():
        assert row.prefix_reuse is not None
        sending = row.sent_tokens * (row.prefix_reuse * 0.1 + (1 - row.prefix_reuse) * 1.25)
        assert row.cost > sending * 0.999 + row.summarizer_tokens * 0.999
        assert row.cost < sending * 1.001 + row.summarizer_tokens * 5.001
    off = run_policy(
        trace,
        "claude-code",
        6_000,
        count,
        state_dir=tmp_path / "x",
        overrides={"identifier_tokens": 0},
    )
    assert off is not None and off.summarizer_calls > 0


def test_cost_is_compared_with_the_agents_own_compactions() -> None:
    from openprogram.bench import with_native_ratio

    def row(policy: str, cost: float) -> Any:
        made = compute_metrics(
            [], trace="t", policy=policy, first_user_text="", budget=10, count_message=len
        )
        import msgspec

        return msgspec.structs.replace(made, cost=cost)

    ours, native, other = with_native_ratio(
        [row("claude-code", 50.0), row("native", 100.0), row("trim", 0.0)]
    )
    assert ours.cost_vs_native == 0.5 and native.cost_vs_native == 1.0
    assert other.cost_vs_native == 0.0


def test_bench_takes_settings_and_refuses_bad_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _long_chat(tmp_path / "long.jsonl", rounds=12)
    argv = ["bench", str(path), "--policies", "claude-code", "--budget", "2000", "--json"]
    assert main([*argv, "--set", "identifier_tokens=0", "--set", "low_water=0.6"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["policy"] == "claude-code" and row["over_budget"] == 0
    assert main([*argv, "--set", "nonsense"]) == 2  # a usage error
    assert "FIELD=VALUE" in capsys.readouterr().err


def test_progressive_waits_for_new_rounds_before_rewriting_its_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Progressive's soft step fired each time the prompt passed 70% of the budget and
    rewrote the merged summary to take in a round or two; it now waits until the new rounds
    hold ``compact_min_fresh_share`` of the budget (``--set`` turns it off)."""
    path = _long_chat(tmp_path / "long.jsonl", rounds=60)
    argv = ["bench", str(path), "--policies", "progressive", "--budget", "6000", "--json"]
    assert main(argv) == 0
    (lever,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main([*argv, "--set", "compact_min_fresh_share=null"]) == 0
    (off,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lever["over_budget"] == off["over_budget"] == 0
    assert 0 < lever["summarizer_calls"] < off["summarizer_calls"]
    assert lever["cost"] < off["cost"]
    assert lever["prefix_reuse"] > off["prefix_reuse"]  # fewer rewrites of the prefix
