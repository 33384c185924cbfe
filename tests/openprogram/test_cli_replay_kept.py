"""`openprogram --db D replay` keeps what the replay did (issue 22, item 9): the layers,
records, receipts and configuration land in the session, and the same replay again
reuses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graph import SQLStore
from openprogram.cli import main


def long_trace(path: Path, rounds: int = 40) -> Path:
    messages: list[dict[str, object]] = [{"role": "user", "content": "task: fix src/app.py"}]
    for i in range(rounds):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": f"step {i} on handler_{i}", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"line {i}\n" * 300},
        ]
    path.write_text(json.dumps(messages))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_stored_replay_keeps_its_layers_records_and_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = long_trace(tmp_path / "t.json")
    db = str(tmp_path / "rp.db")
    code, out, err = run(capsys, "--db", db, "replay", str(trace), "--budget", "3000", "--json")
    assert (code, err) == (0, "")
    session = json.loads(out)["session"]
    code, out, _ = run(capsys, "--db", db, "collapses", session, "--json")
    layers = {layer["id"] for layer in json.loads(out)}
    assert code == 0 and layers
    code, out, _ = run(capsys, "--db", db, "records", session, "--json")
    records = json.loads(out)
    assert code == 0 and {"compact", "snip"} <= {r["tier"] for r in records}
    named = {r["details"]["layer"] for r in records if r["details"].get("layer")}
    assert named and named <= layers  # every layer a record names is in the database
    logged = (tmp_path / "rp.db.state" / "records" / f"{session}.jsonl").read_text()
    assert all(layer in logged for layer in named)
    code, out, _ = run(capsys, "--db", db, "context", session, "--json")
    shown = json.loads(out)
    assert code == 0 and shown["source"] == "receipt" and shown["budget"] == 3000


def test_the_same_replay_again_reuses_its_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = long_trace(tmp_path / "t.json", rounds=12)
    db = str(tmp_path / "rp.db")
    code, first, _ = run(capsys, "--db", db, "replay", str(trace), "--budget", "2000")
    assert code == 0
    code, again, _ = run(capsys, "--db", db, "replay", str(trace), "--budget", "2000")
    [info] = SQLStore(db, create=False).sessions()
    assert code == 0 and "replayed with these settings already" in again
    assert info.id in again and info.id in first
    code, _, _ = run(capsys, "--db", db, "replay", str(trace), "--budget", "1500")
    assert code == 0 and len(SQLStore(db, create=False).sessions()) == 2  # other settings
