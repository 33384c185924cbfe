"""`openprogram export` then `openprogram import` elsewhere brings the whole session back
(issue 22, item 11): configuration, branches, layers, records, tier state and receipts, and
the next prompt renders byte for byte as before."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from _runtime_helpers import append_read_rounds

from openprogram import Session
from openprogram.cli import main
from openprogram.testing import TestModel


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _worked_session(db: Path) -> None:
    session = Session(db, "s1", model=TestModel(default="ok"), system="You fix bugs.")
    append_read_rounds(session, 0, 30)
    session.close()


def _next_prompt(db: Path) -> bytes:
    """The prompt the session reopened as stored would send next."""
    session = Session(db, "s1", model=TestModel(default="ok"))
    try:
        return msgspec.json.encode(session.engine.preview().messages)
    finally:
        session.close()


@pytest.mark.parametrize("suffix", [".json", ".graphml"])
def test_an_export_loaded_elsewhere_is_the_whole_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    _worked_session(a)
    code, _, _ = run(capsys, "--db", str(a), "configure", "s1", "--budget", "4000",
                     "--policy", "progressive")  # fmt: skip
    assert code == 0
    model = TestModel(default="ok")
    session = Session(a, "s1", model=model)
    assert session.llm("go on") == "ok"  # a render under the new policy: layers, a receipt
    session.graph.create_branch("try", at=session.graph.head)
    session.close()
    out = tmp_path / f"s1{suffix}"
    assert run(capsys, "--db", str(a), "export", "s1", str(out))[0] == 0
    assert run(capsys, "--db", str(b), "import", str(out))[0] == 0
    shown = {}
    for db in (a, b):
        for command in ("context", "collapses", "records", "configure"):
            code, text, err = run(capsys, "--db", str(db), command, "s1", "--json")
            assert (code, err) == (0, "")
            shown[db, command] = json.loads(text)
        shown[db, "show"] = json.loads(run(capsys, "--db", str(db), "show", "s1", "--json")[1])
    for command in ("context", "collapses", "records", "configure", "show"):
        assert shown[a, command] == shown[b, command], command
    assert shown[b, "context"]["source"] == "receipt"
    last = shown[b, "context"]["last_sent"]  # the exact prompt, its messages carried along
    assert last["exact"] is True and last["sent"] == model.requests[-1].messages
    assert shown[b, "context"]["budget"] == 4000
    assert shown[b, "configure"]["config"]["policy"]["values"]["name"] == "progressive"
    assert shown[b, "collapses"] and shown[b, "records"]
    assert set(shown[b, "show"]["branches"]) == {"main", "try"}
    assert _next_prompt(a) == _next_prompt(b)
