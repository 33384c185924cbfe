"""``bench --split FILE --half tune|report``: the bench runs one half of a split fixed in a file,
and refuses a split or traces that would let a trace count on the wrong side unnoticed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openprogram.cli import main


def _chat(path: Path, task: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    messages = [
        {"role": "user", "content": task},
        {"role": "assistant", "content": "looking"},
        {"role": "user", "content": "go on"},
        {"role": "assistant", "content": "done"},
    ]
    path.write_text("".join(json.dumps(m) + "\n" for m in messages))


TRACES = ["a/one.jsonl", "a/two.jsonl", "b/three.jsonl", "b/four.jsonl"]


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    root = tmp_path / "traces"
    for relative in TRACES:
        _chat(root / relative, f"task: {relative}")
    return root


def _split(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "split.txt"
    path.write_text(text)
    return path


SPLIT = """# the rule would be written here
tune a/one.jsonl
report a/two.jsonl   # a comment after an entry

tune b/three.jsonl
report b/four.jsonl
"""


def _bench(*argv: str) -> list[str]:
    return ["bench", *argv, "--policies", "none", "--json"]


def _traces_run(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [json.loads(line)["trace"] for line in capsys.readouterr().out.splitlines()]


def test_each_half_runs_only_its_traces_named_as_in_the_split(
    tmp_path: Path, traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    split = str(_split(tmp_path, SPLIT))
    assert main(_bench(str(traces), "--split", split, "--half", "tune")) == 0
    assert _traces_run(capsys) == ["a/one.jsonl", "b/three.jsonl"]
    assert main(_bench(str(traces), "--split", split, "--half", "report")) == 0
    assert _traces_run(capsys) == ["a/two.jsonl", "b/four.jsonl"]


def test_a_subset_of_the_traces_folder_keeps_the_splits_names(
    tmp_path: Path, traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    split = str(_split(tmp_path, SPLIT))
    argv = _bench(str(traces / "b"), str(traces / "a" / "two.jsonl"), "--split", split)
    assert main([*argv, "--half", "report"]) == 0
    assert _traces_run(capsys) == ["b/four.jsonl", "a/two.jsonl"]


def test_a_trace_the_split_does_not_list_is_refused_by_name(
    tmp_path: Path, traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _chat(traces / "c" / "stray.jsonl", "task: stray")
    split = str(_split(tmp_path, SPLIT))
    assert main(_bench(str(traces), "--split", split, "--half", "tune")) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "does not list 1 of the traces given" in captured.err
    assert "stray.jsonl" in captured.err


def test_a_split_naming_a_trace_that_is_not_there_says_which(
    tmp_path: Path, traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    split = str(_split(tmp_path, SPLIT + "report b/gone.jsonl\n"))
    assert main(_bench(str(traces), "--split", split, "--half", "tune")) == 1
    err = capsys.readouterr().err
    assert "not there" in err and "gone.jsonl" in err


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("tune a/one.jsonl\nhalf a/two.jsonl\n", 2, "expected '<half> <trace path>'"),
        ("tune a/one.jsonl\n\n# c\nreport\n", 4, "expected '<half> <trace path>'"),
        ("tune a/one.jsonl\nreport ../a/two.jsonl\n", 2, "relative to the traces folder"),
        ("tune a/one.jsonl\nreport a/one.jsonl\n", 2, "already listed on line 1"),
    ],
)
def test_a_malformed_split_file_is_one_line_naming_file_and_line(
    tmp_path: Path,
    traces: Path,
    capsys: pytest.CaptureFixture[str],
    text: str,
    line: int,
    says: str,
) -> None:
    split = _split(tmp_path, text)
    assert main(_bench(str(traces), "--split", str(split), "--half", "tune")) == 1
    err = capsys.readouterr().err
    assert f"{split}:{line}:" in " ".join(err.split()) and says in err


def test_half_and_split_need_each_other_and_the_half_must_be_known(
    tmp_path: Path, traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    split = str(_split(tmp_path, SPLIT))
    assert main(_bench(str(traces), "--half", "tune")) == 2
    assert "--half needs --split FILE" in capsys.readouterr().err
    assert main(_bench(str(traces), "--split", split)) == 2
    assert "--split needs --half" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(_bench(str(traces), "--split", split, "--half", "holdout"))
    assert exit_.value.code == 2
    assert "invalid choice: 'holdout'" in capsys.readouterr().err


def test_losses_run_on_the_half_too(
    tmp_path: Path, traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    split = str(_split(tmp_path, SPLIT))
    argv = ["bench", str(traces), "--split", split, "--half", "report", "--losses", "trim"]
    assert main([*argv, "--policies", "claude-code"]) == 0
    out = capsys.readouterr().out
    assert "two.jsonl" in out and "four.jsonl" in out and "one.jsonl" not in out


def test_without_split_the_default_is_the_small_set_and_with_it_the_whole_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = tmp_path / "shared" / "traces"
    for relative in ("claude-code/s.jsonl", "swe-agent/t.jsonl", "claude-code-more/m.jsonl"):
        _chat(shared / relative, f"task: {relative}")
    split = _split(tmp_path, "tune claude-code/s.jsonl\nreport claude-code-more/m.jsonl\n")
    split.write_text(split.read_text() + "tune swe-agent/t.jsonl\n")
    monkeypatch.chdir(tmp_path)
    assert main(_bench()) == 0
    assert _traces_run(capsys) == ["claude-code/s.jsonl", "swe-agent/t.jsonl"]
    assert main(_bench("--split", str(split), "--half", "report")) == 0
    assert _traces_run(capsys) == ["claude-code-more/m.jsonl"]
