"""The bench's replay driver: how traces are found and named, and what anchoring reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from openprogram._cli import main
from openprogram.bench import compute_metrics, format_table, trace_files, trace_names


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
