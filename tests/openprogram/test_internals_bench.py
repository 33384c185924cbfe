"""The bench's parts below its tables.

``openprogram bench --scale`` on small sessions: the shape of what it reports (its figures
are measurements, so no test holds them to a goal). The bench runs once; the table and the
JSON are both made from that run. A step that fails or runs out of time is a row that says
so, never a crash. Then the metrics' incremental identifier index, the cause ``--losses``
reads off a losing prompt, the pydantic-ai peer's merged requests, and how ``--behaviour``
reads, compares and samples next actions."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

# internal: scale steps one by one, identifier index, loss cause, merging, next actions
import openprogram.bench._scale as scale
from graph import SQLStore, dispose_engines
from openprogram import BenchError
from openprogram.bench import Turn, from_pydantic_ai, to_pydantic_ai
from openprogram.bench._behaviour import Action, action_of, agree, parse_action, sample_turns
from openprogram.bench._losses import _cause
from openprogram.bench._metrics import _HistoryIdentifiers
from openprogram.bench._pydantic_ai import merge_requests
from openprogram.cli import main

Msg = dict[str, Any]
SYSTEM: Msg = {"role": "system", "content": "sys"}
TASK: Msg = {"role": "user", "content": "task"}


def user(text: str) -> Msg:
    return {"role": "user", "content": text}


def call(call_id: str, name: str = "Read", arguments: str = '{"file_path": "a.py"}') -> Msg:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


STEPS = {"raw", "append", "reopen", "cold", "render"}
UNITS = [
    "× raw insert",
    "× raw read + decode",
    "KB",
    "× raw read + decode",
    "layers",
    "× the 1,000-node case",
    "ms",
]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    db = tmp_path_factory.mktemp("scale") / "scale.db"
    figures = scale.measure(str(db), [2000, 3000])
    dispose_engines()
    return db, figures


def test_scale_bench_json_shape(
    run: tuple[Path, dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db, figures = run
    monkeypatch.setattr(scale, "measure", lambda *args, **kwargs: figures)
    assert main(["--db", str(db), "bench", "--scale", "--nodes", "2000,3000", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["db"] == "sqlite" and report["sizes"] == [2000, 3000]
    assert report["steps"] == ["append", "reopen", "cold", "render"]
    assert [row["unit"] for row in report["goals"]] == UNITS * 2
    assert [row["nodes"] for row in report["goals"]] == [2000] * 7 + [3000] * 7
    for row in report["goals"]:
        assert set(row) == {"nodes", "step", "value", "unit", "goal", "met", "note"}
        assert row["value"] >= 0 and isinstance(row["met"], bool) and row["note"] == ""
    assert set(report["runs"]) == {"1000", "2000", "3000"}
    for size, steps in report["runs"].items():
        assert set(steps) == STEPS
        assert steps["append"]["nodes"] >= int(size)
        assert steps["reopen"]["nodes"] == steps["append"]["nodes"]
        assert steps["render"]["tokens"] <= 32_000 and steps["render"]["messages"] > 0
        assert steps["render"]["append_render_ms"] > 0
        assert steps["raw"]["nodes"] == steps["append"]["nodes"] == steps["raw"]["edges"] + 1
        assert steps["raw"]["read_cpu_seconds"] > 0 and steps["cold"]["cpu_seconds"] > 0
        for step in steps.values():
            assert step["peak_mb"] >= step["rss_mb"] > 0
    left = [s.id for s in SQLStore(db).sessions() if s.id.startswith("scale-")]
    assert left == []  # a database given with --db is left as it was


def test_scale_bench_table_has_a_column_per_size(
    run: tuple[Path, dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    asked: list[Any] = []

    def measured(url: Any, sizes: Any, progress: Any = None, **options: Any) -> dict[str, Any]:
        asked.append((sizes, options))
        return run[1]

    monkeypatch.setattr(scale, "measure", measured)
    assert main(["bench", "--scale", "--nodes", "2000,3000", "--step-timeout", "60"]) == 0
    assert asked == [((2000, 3000), {"steps": scale.STEPS, "timeout": 60.0})]
    out = capsys.readouterr().out
    for words in ("2,000 nodes", "3,000 nodes", "append in one batch()", "reopen", "peak RSS"):
        assert words in out
    for words in ("first render", "× raw", "refresh()", "append, 3,000"):
        assert words in out


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        (["--nodes", "3"], "at least 10"),
        (["--nodes", "2000,5"], "at least 10"),
        (["--steps", "render"], "needs 'cold'"),
        (["--steps", "append,compact"], "unknown scale step 'compact'"),
        (["--step-timeout", "0"], "positive"),
    ],
)
def test_scale_options_are_checked_before_anything_runs(
    options: list[str],
    problem: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(scale, "measure", lambda *args, **kwargs: pytest.fail("measured"))
    assert main(["bench", "--scale", *options]) == 2
    assert problem in capsys.readouterr().err


def test_chosen_steps_keep_their_order_and_needs() -> None:
    assert scale.chosen_steps(None) == scale.STEPS
    assert scale.chosen_steps(["reopen", "append"]) == ("append", "reopen")
    with pytest.raises(BenchError, match="'reopen' needs 'append'"):
        scale.chosen_steps(["reopen"])


def test_a_step_that_fails_or_times_out_is_a_row_and_skips_what_needs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[str] = []
    real = scale._run_step

    def run_step(name: str, args: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        ran.append(f"{args['nodes']}:{name}")
        if name == "cold":
            return {"error": f"timed out after {timeout:g} s"}
        if name == "reopen":
            return {"error": "failed: MemoryError"}
        return real(name, args, timeout)

    monkeypatch.setattr(scale, "_run_step", run_step)
    figures = scale.measure(
        str(tmp_path / "s.db"), 500, timeout=600
    )  # the real steps: never on a busy machine
    dispose_engines()
    assert ran == ["500:raw", "500:append", "500:reopen", "500:cold", "1000:raw", "1000:append",
                   "1000:reopen", "1000:cold"]  # fmt: skip
    rows = {row.step: row for row in scale.goals(figures)}
    assert rows["append in one batch()"].met is not None
    assert rows["append in one batch()"].value is not None
    assert rows["reopen the session"].note == "reopen failed: MemoryError"
    assert rows["refresh() with nothing new"].value is None
    cold = rows["first render ever, CPU (no saved state)"]
    assert (cold.value, cold.met, cold.note) == (None, None, "cold timed out after 600 s")
    assert rows["render after one more append"].note == "render skipped: cold did not finish"
    peak = next(row for step, row in rows.items() if step.startswith("peak RSS"))
    assert peak.value is not None and peak.value > 0  # append measured it
    assert all(row.value is not None or row.note for row in rows.values())


def test_run_step_reports_a_time_limit_and_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    def too_slow(*args: Any, **kwargs: Any) -> Any:
        raise subprocess.TimeoutExpired(args[0], kwargs["timeout"])

    monkeypatch.setattr(subprocess, "run", too_slow)
    assert scale._run_step("cold", {}, 1.5) == {"error": "timed out after 1.5 s"}

    def broken(*args: Any, **kwargs: Any) -> Any:
        return subprocess.CompletedProcess(args[0], 1, "", "Traceback …\nMemoryError\n")

    monkeypatch.setattr(subprocess, "run", broken)
    assert scale._run_step("append", {}, None) == {"error": "failed: MemoryError"}


def test_only_the_steps_asked_for_run(tmp_path: Path) -> None:
    figures = scale.measure(str(tmp_path / "s.db"), 300, steps=["append", "reopen"])
    dispose_engines()
    assert set(figures["runs"]) == {"300"}  # no render: no baseline size is needed
    assert set(figures["runs"]["300"]) == {"raw", "append", "reopen"}
    rows = {row.step: row for row in scale.goals(figures)}
    assert rows["reopen the session"].value is not None
    assert rows["layers the first render ever made"].note == "not run (--steps)"
    with pytest.raises(BenchError, match="at least 10"):
        scale.measure(None, [5])


def test_history_identifiers_rescan_when_not_an_extension() -> None:
    seen = _HistoryIdentifiers()
    h1 = [user("alpha_one")]
    assert seen.update(h1) == {"alpha_one"}
    assert seen.update([*h1, user("beta_two")]) == {"alpha_one", "beta_two"}
    # same length, different last message: full rescan
    assert seen.update([user("gamma_three"), user("delta_four")]) == {"gamma_three", "delta_four"}
    assert seen.update([user("eps_five")]) == {"eps_five"}  # shorter: full rescan
    assert seen.update([]) == set()


def test_a_merged_request_converts_back_to_each_message() -> None:
    merged = merge_requests(to_pydantic_ai(SYSTEM), to_pydantic_ai(TASK))
    assert [p.part_kind for p in merged.parts] == ["system-prompt", "user-prompt"]
    assert from_pydantic_ai(merged) == [SYSTEM, TASK]


def test_identifier_losses_say_where_in_an_assistant_message() -> None:
    edit = call("c1", "Edit", json.dumps({"file_path": "src/app_main.py", "old_string": "x"}))
    said = {"role": "assistant", "content": "parse_header is the bug", "tool_calls": [edit]}
    history: list[Msg] = [{"role": "user", "content": "task"}, said]
    gone = "assistant {} collapsed, compacted or dropped"
    assert _cause("parse_header", history, []) == gone.format("text")
    assert _cause("src/app_main.py", history, []) == gone.format("tool-call argument")
    assert _cause("old_string", history, []) == gone.format("tool-call argument name")
    assert _cause("never_seen", history, []) == "not in the history"
    assert _cause("task", [{"role": "user", "content": "the task"}], []) == (
        "user message collapsed, compacted or dropped"
    )


def test_actions_and_sampling() -> None:
    call = {"name": "Read", "arguments": json.dumps({"file_path": "a.py", "limit": 20})}
    assert action_of({"role": "assistant", "tool_calls": [{"function": call}]}) == Action(
        "Read", "a.py"
    )
    assert action_of({"role": "assistant", "content": "done"}) == Action(None)
    assert parse_action('{"tool": "Read", "arguments": {"file_path": "a.py"}}') == Action(
        "Read", "a.py"
    )
    assert parse_action("no json here") == Action("?")
    assert agree(Action("Read", "a.py"), Action("Read", ""))
    assert not agree(Action("Read", "a.py"), Action("Read", "b.py"))
    assert not agree(Action("?"), Action("?"))
    turns = [Turn([], 0, tokens, {}, [], 0.0) for tokens in range(0, 100, 10)]
    assert sample_turns(turns, 45, 2) == [6, 8]
    assert sample_turns(turns, 45, 9) == [5, 6, 7, 8, 9]
