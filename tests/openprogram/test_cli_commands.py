"""Every command through the real entry point, on SQLite and PostgreSQL, bad input included:
one clear line, the right exit code, nothing lost or changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from context import ContextEngine, Policy
from graph import ConversationGraph
from openprogram.cli import main
from tests.openprogram._runtime_helpers import without_ids

ROOT = Path(__file__).resolve().parents[2]


def _session(url: str, state: Path, name: str = "s1", rounds: int = 14) -> dict[str, Any]:
    """A session with tool rounds, a finished function, a collapse layer and records."""
    g = ConversationGraph.open(url, session=name)
    g.append({"role": "system", "content": "You are terse."})
    g.append({"role": "user", "content": "Find why /export is slow."})
    assistants = []
    for i in range(rounds):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
        a = g.append({"role": "assistant", "content": f"reading part_{i}.py", "tool_calls": [call]})
        assistants.append(a.id)
        g.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"def fn_{i}(): ...\n" * 40})
    with g.function("research", input={"q": "export"}) as fn:
        g.append({"role": "assistant", "content": "route() scans every handler"})
        fn.output = "route() is O(n)"
    engine = ContextEngine(g, Policy(), budget=100_000, state_dir=state)
    layer = engine.collapse(assistants[1], assistants[6])
    engine.render()
    return {"graph": g, "layer": layer.id, "function": fn.id, "assistants": assistants}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def db(store_url: str, tmp_path: Path) -> dict[str, Any]:
    state = tmp_path / "state"
    made = _session(store_url, state)
    return {"url": store_url, "state": str(state), **made}


def test_read_commands_show_the_session(
    db: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--db", db["url"], "--state-dir", db["state"]]
    code, out, _ = run(capsys, *base, "sessions", "--json")
    assert code == 0 and [s["id"] for s in json.loads(out)] == ["s1"]
    code, out, _ = run(capsys, *base, "show", "s1")
    assert code == 0 and "research" in out and "layer collapse" in out
    code, out, _ = run(capsys, *base, "show", "s1", db["function"], "--json")
    assert code == 0 and json.loads(out)["kind"] == "function"
    code, out, _ = run(capsys, *base, "collapses", "s1", "--json")
    [layer] = json.loads(out)
    assert (
        code == 0 and layer["id"] == db["layer"] and layer["active"] and layer["tokens_saved"] > 0
    )
    code, out, _ = run(capsys, *base, "expand", db["layer"], "--json")
    assert code == 0 and len(json.loads(out)) == 12  # six rounds: assistant + tool each
    code, out, _ = run(capsys, *base, "expand", db["function"])
    assert code == 0 and "route() scans every handler" in out
    code, out, _ = run(capsys, *base, "records", "s1", "--json")
    assert code == 0 and [r["tier"] for r in json.loads(out)] == ["collapse"]
    code, out, _ = run(capsys, *base, "context", "s1", "--json")
    data = json.loads(out)
    assert (code == 0 and data["tokens"] == sum(data["message_tokens"])) or data["tokens"] > 0


def test_read_commands_change_nothing(
    db: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    graph: ConversationGraph = db["graph"]
    before = (graph.store.load("s1"), graph.store.get_values("s1", "context.state"))
    records = graph.store.read_log("s1", "context.records")
    base = ["--db", db["url"], "--state-dir", db["state"]]
    for argv in (["show", "s1"], ["context", "s1", "--budget", "300"], ["collapses", "s1"],
                 ["records", "s1"], ["expand", db["layer"]], ["sessions"]):  # fmt: skip
        assert run(capsys, *base, *argv)[0] == 0
    assert (graph.store.load("s1"), graph.store.get_values("s1", "context.state")) == before
    assert graph.store.read_log("s1", "context.records") == records


def test_write_commands(
    db: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--db", db["url"], "--state-dir", db["state"]]
    code, out, _ = run(capsys, *base, "rollback", "s1", db["layer"], "--reason", "look again")
    assert code == 0 and "rolled back" in out and "→" in out
    code, out, _ = run(capsys, *base, "compact", "s1", "--focus", "export")
    assert code == 0 and "compacted" in out
    code, out, _ = run(capsys, *base, "collapses", "s1", "--json")
    assert [(x["kind"], x["active"]) for x in json.loads(out)] == [
        ("collapse", False),
        ("compact", True),
    ]
    code, out, _ = run(capsys, *base, "fork", "s1", db["assistants"][3])
    assert code == 0 and "branch" in out
    target = str(tmp_path / "copy.db")
    code, out, _ = run(capsys, *base, "copy", "s1", "--to", target, "--as", "s1copy")
    assert code == 0 and "copied" in out
    copied = ConversationGraph.open(target, session="s1copy")
    original = ConversationGraph.open(db["url"], session="s1").to_openai()
    assert without_ids(copied.to_openai()) == without_ids(original)  # new ids, same messages
    code, out, _ = run(
        capsys, *base, "export", "s1", str(tmp_path / "s1.json"), "--format", "openai"
    )
    assert code == 0 and json.loads((tmp_path / "s1.json").read_text())[0]["role"] == "system"
    code, out, _ = run(capsys, *base, "delete", "s1")
    assert code == 0 and "deleted" in out
    code, _, err = run(capsys, *base, "show", "s1")
    assert code == 1 and "no session 's1'" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["show", "nope"], "no session 'nope'"),
        (["rollback", "s1", "01NOPE"], "no layer '01NOPE'"),
        (["expand", "01NOPE"], "no layer or node '01NOPE'"),
        (["context", "s1", "--model", "nope-model"], "model"),
        (["records", "nope", "--log"], "no records log"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(
    db: dict[str, Any], capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    graph: ConversationGraph = db["graph"]
    before = graph.store.load("s1")
    code, _, err = run(capsys, "--db", db["url"], "--state-dir", db["state"], *argv)
    assert code == 1
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert graph.store.load("s1") == before


def test_rolling_back_twice_and_another_sessions_layer(
    db: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--db", db["url"], "--state-dir", db["state"]]
    other = _session(db["url"], Path(db["state"]), name="s2", rounds=8)
    code, _, err = run(capsys, *base, "rollback", "s1", other["layer"])
    assert code == 1 and "belongs to session 's2'" in err
    assert run(capsys, *base, "rollback", "s1", db["layer"])[0] == 0
    code, _, err = run(capsys, *base, "rollback", "s1", db["layer"])
    assert code == 1 and "already rolled back" in err


def test_a_corrupt_database_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a database" * 100)
    code, _, err = run(capsys, "--db", str(bad), "sessions")
    assert code == 1 and "cannot open database" in err and "Traceback" not in err
    assert bad.read_bytes() == b"this is not a database" * 100


def test_reading_a_missing_database_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = tmp_path / "nowhere" / "op.db"
    code, _, err = run(capsys, "--db", str(where), "show", "s1")
    assert code == 1 and "no database at" in err
    assert not where.parent.exists()
    code, out, _ = run(capsys, "--db", str(where), "sessions")
    assert code == 0 and "no sessions" in out and not where.parent.exists()


def test_sessions_reports_a_store_error_that_only_reads_like_a_missing_database(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Only ``NoDatabase`` means "no sessions yet", whatever another error's text says."""
    from graph import StoreError, register_store

    def refused(*_: Any, **__: Any) -> Any:
        raise StoreError("no database at the address given: server refused")

    register_store("refusing-test", refused)
    code, out, err = run(capsys, "--db", "refusing-test://host/op", "sessions")
    assert code == 1 and "server refused" in err and "no sessions" not in out


def test_records_skip_a_damaged_log_line_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/op.db"
    state = tmp_path / "state"
    made = _session(url, state)
    engine = ContextEngine(made["graph"], Policy(), budget=100_000, state_dir=state)
    engine.compact()
    log = state / "records" / "s1.jsonl"
    lines = log.read_bytes().splitlines()
    log.write_bytes(b"\n".join([lines[0], b"{damaged", *lines[1:]]) + b"\n")
    code, out, err = run(
        capsys, "--db", url, "--state-dir", str(state), "records", "s1", "--log", "--json"
    )
    assert code == 0 and [r["tier"] for r in json.loads(out)] == ["collapse", "compact"]
    assert "s1.jsonl:2" in err and "warning" in err


def test_gc_removes_what_no_session_owns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/op.db"
    state = tmp_path / "state"
    _session(url, state)
    orphan = state / "tool_results" / "gone"
    orphan.mkdir(parents=True)
    (orphan / "01X.txt").write_text("x")
    stale = state / "tool_results" / "s1" / "01NOTANODE000000000000000.txt"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("y")
    (state / "records" / "gone.jsonl").write_text("")
    # a killed offload's temporary file, and one a live writer is writing now
    killed = stale.parent / ".01KILLED.txt.ab12.tmp"
    killed.write_text("partial")
    old = time.time() - 3_600
    os.utime(killed, (old, old))
    writing = stale.parent / ".01WRITING.txt.cd34.tmp"
    writing.write_text("in progress")
    code, out, _ = run(capsys, "--db", url, "--state-dir", str(state), "gc", "--dry-run")
    assert code == 0 and "would remove" in out and orphan.exists()
    code, out, _ = run(capsys, "--db", url, "--state-dir", str(state), "gc")
    assert code == 0 and not orphan.exists() and not stale.exists()
    assert not killed.exists() and writing.exists()
    assert (
        not (state / "records" / "gone.jsonl").exists()
        and (state / "records" / "s1.jsonl").exists()
    )


def test_run_executes_a_program_against_a_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "agent.py"
    program.write_text(
        "import openprogram\n"
        "from openprogram.testing import TestModel, override\n\n"
        "@openprogram.function\n"
        "def ask(q: str) -> str:\n"
        "    return openprogram.llm(q)\n\n"
        "def main(session):\n"
        "    with override(model=TestModel(['forty-two'])):\n"
        "        return ask('the answer?')\n"
    )
    url = str(tmp_path / "op.db")
    code, out, _ = run(
        capsys,
        "--db",
        url,
        "--state-dir",
        str(tmp_path / "st"),
        "run",
        str(program),
        "--session",
        "r1",
    )
    assert code == 0 and "forty-two" in out and "session r1" in out
    graph = ConversationGraph.open(url, session="r1")
    assert [n.payload.name for n in graph.nodes() if n.kind == "function"] == ["ask"]  # type: ignore[union-attr]
    code, _, err = run(capsys, "--db", url, "run", str(tmp_path / "missing.py"))
    assert code == 2 and "no program file" in err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["no-such-command"])
    assert exit.value.code == 2
    capsys.readouterr()


def test_the_installed_entry_point(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = Path(sys.executable).parent / "openprogram"
    done = subprocess.run(
        [str(script), "--db", str(tmp_path / "none.db"), "show", "s1"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and done.stderr.startswith("error: no database at")
    assert "Traceback" not in done.stderr
    debug = subprocess.run(
        [str(script), "--db", str(tmp_path / "none.db"), "--debug", "show", "s1"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert debug.returncode != 0 and "Traceback" in debug.stderr
