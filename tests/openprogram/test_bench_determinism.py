"""A bench figure is a function of its trace, policy and budget: the other budgets, policies
and traces of the same run, and their order, must not move it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from openprogram.cli import main

_TIMING = ("ms_p50", "ms_p99", "summarizer_ms")
"""Wall times, which vary run to run by design."""
_ACROSS_ROWS = ("cost_vs_harness", "cost_vs_native")
"""Ratios to another policy's row of the same trace, present only when that policy ran."""


def _long_chat(path: Path, name: str, rounds: int) -> Path:
    """An OpenAI-format trace of tool rounds long enough that our policies compact it, with
    identifiers the later rounds use again (what the recall figure measures)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"task: fix {name}/app.py"}]
    for i in range(rounds):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "Read", "arguments": json.dumps({"path": f"{name}/part_{i}.py"})},
        }
        said = f"reading part_{i}.py: fn_{i} may call parse_{name}_{i // 3} wrongly. " * 6
        messages.append({"role": "assistant", "content": said, "tool_calls": [call]})
        output = "".join(f"def fn_{i}_{j}(): return parse_{name}_{j % 7}()\n" for j in range(60))
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": output})
    messages.append({"role": "assistant", "content": f"fixed parse_{name}_2 in part_3.py"})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(m) + "\n" for m in messages))
    return path


def _rows(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[tuple[str, str, int], Any]:
    assert main(["bench", *argv, "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    return {
        (row["trace"], row["policy"], row["budget"]): {
            key: value
            for key, value in row.items()
            if key not in _TIMING and key not in _ACROSS_ROWS
        }
        for row in rows
    }


def test_a_traces_figure_does_not_depend_on_the_rest_of_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _long_chat(tmp_path / "traces" / "alpha.jsonl", "alpha", rounds=30)
    second = _long_chat(tmp_path / "traces" / "beta.jsonl", "beta", rounds=24)
    combined = _rows(
        [
            str(tmp_path / "traces"),
            "--budget",
            "32000",
            "--budget",
            "3000",
            "--policies",
            "harness,progressive,claude-code",
        ],
        capsys,
    )
    alone = _rows([str(second), "--budget", "3000", "--policies", "claude-code"], capsys)
    reordered = _rows(
        [str(second), str(first), "--budget", "3000", "--policies", "claude-code,progressive"],
        capsys,
    )
    key = ("beta.jsonl", "claude-code", 3000)
    assert combined[key]["summarizer_calls"] > 0  # the budget made claude-code compact
    assert combined[key]["ref_recall"] is not None
    assert alone == {key: combined[key]}
    for found, row in reordered.items():
        assert row == combined[found], found
    assert set(reordered) == {
        (trace, policy, 3000)
        for trace in ("alpha.jsonl", "beta.jsonl")
        for policy in ("claude-code", "progressive")
    }
