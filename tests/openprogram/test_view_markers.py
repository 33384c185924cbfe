"""Issue 33: the viewer places a compaction on the call whose render made it (the record
names its render, the receipt its render), not by comparing clocks: a replayed Claude Code
trace's records keep the trace's time apart (``clock``) and are stamped with the wall
clock, and its first compaction sits on the call whose prompt dropped, not on call 1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from openprogram.cli import main
from openprogram.view import COOKIE, Viewer, create_app

WHEN = "2026-01-01T10:00:00.000Z"
FREED = "the prompt before the call's compactions, less what was sent"
"""The timeline's label of a call's freed tokens, as its page shows it."""
HOST = "127.0.0.1:9"


def _trace(path: Path, rounds: int = 30) -> Path:
    records: list[dict[str, Any]] = []
    base = {"isSidechain": False, "userType": "external", "sessionId": "markers"}
    parent = None
    for n in range(rounds):
        text = "fix src/app.py" if n == 0 else f"go on with step {n}"
        user = {"role": "user", "content": text}
        records.append({**base, "timestamp": WHEN, "type": "user", "uuid": f"u{n}",
                        "parentUuid": parent, "message": user})  # fmt: skip
        use = {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": f"ls {n}"}}
        answer = {"model": "claude-test", "id": f"m{n}", "type": "message", "role": "assistant",
                  "content": [{"type": "text", "text": f"step {n}"}, use],
                  "usage": {"input_tokens": 10, "output_tokens": 1}}  # fmt: skip
        records.append({**base, "timestamp": WHEN, "type": "assistant", "uuid": f"a{n}",
                        "parentUuid": f"u{n}", "message": answer})  # fmt: skip
        result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": f"row {n}\n" * 300}
        records.append({**base, "timestamp": WHEN, "type": "user", "uuid": f"r{n}",
                        "parentUuid": f"a{n}", "message": {"role": "user", "content": [result]}})  # fmt: skip
        parent = f"r{n}"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_replays_first_compaction_sits_on_the_call_whose_prompt_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "r.db")
    trace = _trace(tmp_path / "markers.jsonl")
    assert main(["--db", db, "replay", str(trace), "--budget", "3000", "--json"]) == 0
    session = json.loads(capsys.readouterr().out)["session"]
    viewer = Viewer(db)
    calls, total = viewer.calls(session, 0, 100, kinds=False)
    marked = [call for call in calls if call.compactions]
    assert total > 10 and marked and marked[0].number > 0
    first = marked[0]
    before = calls[first.number - 1].receipt
    record = max(first.compactions, key=lambda r: r.tokens_before - r.tokens_after)
    assert record.tokens_before > first.receipt.tokens  # this call's prompt dropped...
    assert before.tokens < record.tokens_before  # ...from what it would have been
    for call in marked:
        assert all(r.render == call.receipt.render for r in call.compactions)
    # freed: what the prompt shed (the prompt before, less what was sent), labelled so
    assert first.freed == max(r.tokens_before for r in first.compactions) - first.receipt.tokens
    with TestClient(create_app(viewer, token="t", hosts={HOST}), base_url=f"http://{HOST}") as c:
        c.cookies.set(COOKIE, "t")
        timeline = c.get(f"/s/{session}").text
    assert f"freed {first.freed:,} tokens ({FREED})</title>" in timeline
    assert record.clock is not None and record.clock.startswith("2026-01-01T10:00")
    assert not record.timestamp.startswith("2026-01-01T10:00")  # wall clock


def test_the_prompt_pages_kinds_are_context_jsons_parts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same prompt, told apart by the viewer and by ``context --json``: the same parts
    under the same names (summaries included), the same totals."""
    db = str(tmp_path / "r.db")
    trace = _trace(tmp_path / "markers.jsonl")
    assert main(["--db", db, "replay", str(trace), "--budget", "3000", "--json"]) == 0
    session = json.loads(capsys.readouterr().out)["session"]
    assert main(["context", session, "--db", db, "--json"]) == 0
    parts = json.loads(capsys.readouterr().out)["last_sent"]["shown"]["parts"]
    by_kind = Viewer(db).prompt(session).by_kind
    assert {kind: tokens for kind, tokens in by_kind.items() if tokens} == parts
    assert {"summaries (layers)", "tool outputs"} <= set(parts)
