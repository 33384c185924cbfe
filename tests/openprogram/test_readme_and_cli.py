"""The README's library example runs as written, and the CLI's main commands work."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _runtime_helpers import refuse_appending

from graph import ConversationGraph
from openprogram.cli import main

README = Path(__file__).parents[2] / "README.md"


def test_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) == 1
    assert len(blocks[0].strip().splitlines()) <= 24
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], str(README), "exec"), {})


def test_readme_names_the_two_commands() -> None:
    text = README.read_text()
    assert "make demo" in text and "make test" in text


def test_demo_runs_the_research_agent_and_the_tiers_fire(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--db", str(tmp_path / "demo.db"), "demo", "--state-dir", str(tmp_path / "state")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "research completed" in out and "investigate completed" in out
    tiers = re.search(r"tiers that fired: (.*)", out)
    assert tiers is not None
    fired = set(tiers.group(1).split(", "))
    claude_code = {"offload", "microcompact", "collapse", "compact", "snip"}
    assert claude_code <= fired
    assert "emergency" not in fired  # the last resort: its summaries pay, its previews fit
    assert "Read back from the collapsed investigation" in out
    rollback = re.search(r"grew from ([\d,]+) to ([\d,]+) tokens", out)
    assert rollback is not None
    before, after = (int(x.replace(",", "")) for x in rollback.groups())
    assert after > before
    assert "compaction decisions" in out and "share of budget" in out


def test_the_demo_session_is_stored_and_sound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from context import tool_pair_problems
    from openprogram import Session

    db, state = str(tmp_path / "demo.db"), str(tmp_path / "state")
    assert main(["--db", db, "--state-dir", state, "demo"]) == 0
    capsys.readouterr()
    assert main(["--db", db, "sessions", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    session = Session(db, listed["id"], state_dir=state)
    graph = session.graph
    functions = [n for n in graph.nodes() if n.kind == "function"]
    assert {f.payload.name for f in functions} == {  # type: ignore[union-attr]
        "research", "investigate", "synthesize", "review"
    }  # fmt: skip
    assert all(f.status == "completed" for f in functions)
    answers = [str(f.output) for f in functions if f.payload.name == "research"]  # type: ignore[union-attr]
    assert len(answers) == 8 and all(a.startswith("From the findings:") for a in answers)
    review = [n for n in graph.nodes() if n.kind == "tool" and n.payload.name == "expand_function"]  # type: ignore[union-attr]
    assert review and review[0].result is not None and '"answer"' in str(review[0].result.content)
    (reviewed,) = [f for f in functions if f.payload.name == "review"]  # type: ignore[union-attr]
    assert str(reviewed.output).startswith("Read back from the collapsed investigation")
    for layer in session.engine.layers():
        assert session.engine.expand(layer.id)
    rendered = session.engine.render()
    assert rendered.fits and tool_pair_problems(rendered.messages) == []
    assert session.usage()["functions"]["investigate"]["calls"] > 0
    session.close()


def test_import_show_export_delete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "chat.json"
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "x.py"},
        {"role": "assistant", "content": "one file"},
    ]
    trace.write_text(json.dumps(messages))
    db = str(tmp_path / "op.db")
    assert main(["--db", db, "import", str(trace), "--session", "s1"]) == 0
    assert "session s1: 5 messages, 1 tool call," in capsys.readouterr().out
    out = tmp_path / "s1.json"
    assert main(["--db", db, "export", "s1", str(out), "--format", "openai"]) == 0
    exported = json.loads(out.read_text())
    assert [m["role"] for m in exported] == [m["role"] for m in messages]
    assert exported[2]["tool_calls"] == messages[2]["tool_calls"]
    assert exported[3] == messages[3] and exported[4] == messages[4]
    assert main(["--db", db, "sessions"]) == 0
    assert "s1" in capsys.readouterr().out
    assert main(["--db", db, "delete", "s1", "--state-dir", str(tmp_path / "state")]) == 0
    capsys.readouterr()
    assert main(["--db", db, "show", "s1"]) == 1
    assert "no session 's1'" in capsys.readouterr().err
    assert main(["--db", db, "sessions"]) == 0
    assert "s1" not in capsys.readouterr().out


def test_bench_json_over_a_small_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rounds = []
    for i in range(30):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}
        rounds += [
            {"role": "assistant", "content": f"step {i} on src/mod_{i}.py", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"out {i} " * 400},
        ]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps([{"role": "user", "content": "task: fix src/app.py"}, *rounds]))
    code = main(
        ["bench", str(trace), "--budget", "2000", "--policies", "none,masking,default", "--json"]
    )
    assert code == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    by_policy = {row["policy"]: row for row in rows}
    assert set(by_policy) == {"none", "masking", "default"}
    assert by_policy["none"]["over_budget"] > 0
    assert by_policy["default"]["over_budget"] == 0
    assert by_policy["default"]["bad_pairs"] == 0
    assert by_policy["default"]["task_kept"] == 1.0


def test_unknown_policy_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps([{"role": "user", "content": "x"}]))
    assert main(["bench", str(trace), "--policies", "bogus"]) == 2
    assert "unknown policies ['bogus']" in capsys.readouterr().err


def _long_trace(path: Path, rounds: int = 40) -> Path:
    messages: list[dict[str, object]] = [{"role": "user", "content": "task: fix src/app.py"}]
    for i in range(rounds):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": f"step {i}", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"line {i}\n" * 300},
        ]
    path.write_text(json.dumps(messages))
    return path


def test_replay_reports_tiers_records_and_plots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _long_trace(tmp_path / "t.json")
    plot = tmp_path / "tokens.png"
    state = tmp_path / "state"
    args = ["--db", str(tmp_path / "op.db"), "replay", str(trace), "--budget", "3000"]
    assert main([*args, "--state-dir", str(state), "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "compactions (new decisions)" in out and "snip" in out
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert list((state / "records").glob("*.jsonl"))


def test_replay_in_memory_with_a_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _long_trace(tmp_path / "t.json", rounds=5)
    args = ["replay", str(trace), "--memory", "--model", "gpt-4o", "--state-dir", str(tmp_path)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "no compaction was needed" in out
    assert "memory:" in out


def test_context_shows_where_the_tokens_go(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "op.db")
    trace = _long_trace(tmp_path / "t.json", rounds=12)
    assert main(["--db", db, "import", str(trace), "--session", "s1"]) == 0
    capsys.readouterr()
    assert (
        main(["--db", db, "context", "s1", "--budget", "2000", "--state-dir", str(tmp_path)]) == 0
    )
    out = capsys.readouterr().out
    assert "next prompt of s1" in out and "tool outputs" in out and "snip" in out


def test_import_errors_name_the_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "op.db")
    assert main(["--db", db, "import", str(tmp_path / "missing.jsonl")]) == 1
    assert "missing.jsonl" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "ok"}\n{"role": "user", "content": \n')
    assert main(["--db", db, "import", str(bad), "--format", "openai"]) == 1
    out = capsys.readouterr().err
    assert "bad.jsonl" in out and "line 2" in out


def _sessions(db: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    capsys.readouterr()
    assert main(["--db", db, "sessions"]) == 0
    out = capsys.readouterr().out
    return re.findall(r"^│ (\S+)\s+│", out, flags=re.M)


def test_a_failed_import_leaves_no_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "op.db")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "ok"}\n{"role": "user", "content": \n')
    assert main(["--db", db, "import", str(bad), "--session", "s1"]) == 1
    assert "bad.jsonl:line 2" in capsys.readouterr().err
    assert _sessions(db, capsys) == []

    good = tmp_path / "good.jsonl"
    good.write_text('{"role": "user", "content": "a"}\n{"role": "user", "content": "b"}\n')
    refuse_appending(monkeypatch, "b")
    assert main(["--db", db, "import", str(good), "--session", "s1"]) == 1
    assert "good.jsonl:record 2" in capsys.readouterr().err
    assert _sessions(db, capsys) == []
    assert main(["--db", db, "import", str(good)]) == 1
    assert _sessions(db, capsys) == []


def test_a_failed_import_into_an_existing_session_keeps_it_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "op.db")
    trace = _long_trace(tmp_path / "t.json", rounds=2)
    assert main(["--db", db, "import", str(trace), "--session", "s1"]) == 0
    before = ConversationGraph.open(db, session="s1").to_openai()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": 7}\n')
    assert main(["--db", db, "import", str(bad), "--session", "s1"]) == 1
    assert _sessions(db, capsys) == ["s1"]
    assert ConversationGraph.open(db, session="s1").to_openai() == before


def test_importing_the_same_trace_twice_is_a_no_op(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "op.db")
    trace = _long_trace(tmp_path / "t.json", rounds=2)
    assert main(["--db", db, "import", str(trace), "--session", "s1"]) == 0
    assert "session s1: 5 messages" in capsys.readouterr().out
    assert main(["--db", db, "import", str(trace), "--session", "s1"]) == 0
    assert "already imported" in capsys.readouterr().out
    assert len(ConversationGraph.open(db, session="s1")) == 5
