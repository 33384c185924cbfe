"""The bench on a trace with a long autonomous stretch after a later request (issue 32): at
8k, no prompt over budget and the request kept in every pressured prompt, for both presets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from openprogram.cli import main

REQUEST = "Now make the exporter stream rows and run the whole suite until it is green."


def _step(messages: list[dict[str, Any]], k: int, lines: int) -> None:
    call = {"id": f"c{k}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    messages.append({"role": "assistant", "content": f"step {k}", "tool_calls": [call]})
    out = "\n".join(f"src/mod_{k}.py:{n}: row_{n} = export_row({n}, {k})" for n in range(lines))
    messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": out})


def _trace(path: Path) -> Path:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Find why the exporter is slow."},
    ]
    for k in range(6):
        _step(messages, k, 40)
    messages.append({"role": "assistant", "content": "It builds every row in memory."})
    messages.append({"role": "user", "content": REQUEST})
    for k in range(6, 46):  # forty steps on its own
        _step(messages, k, 40)
    body = "\n".join(f"def export_row_{n}(row):\n    return row * {n}" for n in range(2_500))
    write = {"file_path": "src/export.py", "content": body}
    call = {
        "id": "w",
        "type": "function",
        "function": {"name": "Write", "arguments": json.dumps(write)},
    }
    messages.append({"role": "assistant", "content": "Writing it.", "tool_calls": [call]})
    messages.append({"role": "tool", "tool_call_id": "w", "content": "File written."})
    messages.append({"role": "assistant", "content": "Done."})
    path.write_text("".join(json.dumps(m) + "\n" for m in messages))
    return path


def test_a_long_autonomous_stretch_keeps_the_request_within_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _trace(tmp_path / "long.jsonl")
    argv = ["bench", str(trace), "--budget", "8000", "--policies", "claude-code,progressive"]
    assert main([*argv, "--db", str(tmp_path / "bench.db"), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert [row["policy"] for row in rows] == ["claude-code", "progressive"]
    for row in rows:
        assert row["over_budget"] == 0, row
        assert row["bad_pairs"] == 0, row
        assert row["request_kept"] == 1.0, row
        assert row["task_kept"] == 1.0, row
