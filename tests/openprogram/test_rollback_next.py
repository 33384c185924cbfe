"""Issue 33, item 4: a rollback says what happens next. Its record and the CLI name the
layers the next render makes again where the restored rounds do not fit, and the next
prompt the agent sends makes exactly those; where they fit, it says they show whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _runtime_helpers import append_read_rounds

from context import RollbackFacts
from openprogram import Session
from openprogram.cli import main
from openprogram.testing import TestModel


def _session(db: Path, budget: int) -> None:
    session = Session(db, "s", model=TestModel(default="ok"), system="Fix.", budget=budget)
    for step in range(4):
        append_read_rounds(session, step * 6, 6)
        assert session.llm(f"go on {step}") == "ok"
    session.close()


def _layers(db: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    capsys.readouterr()
    assert main(["collapses", "s", "--db", str(db), "--json"]) == 0
    found: list[dict[str, object]] = json.loads(capsys.readouterr().out)
    return found


@pytest.mark.parametrize("budget", [3_000, 60_000])
def test_the_rollback_names_what_the_next_prompt_makes_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], budget: int
) -> None:
    db = tmp_path / "a.db"
    _session(db, budget)
    assert main(["compact", "s", "--db", str(db)]) == 0
    oldest = next(layer for layer in _layers(db, capsys) if layer["active"])
    assert main(["rollback", "s", str(oldest["id"]), "--db", str(db)]) == 0  # and all on it
    printed = capsys.readouterr().out
    session = Session(db, "s", model=TestModel(default="ok"), budget=budget)
    facts = session.engine.records()[-1].facts
    assert isinstance(facts, RollbackFacts)
    known = {str(layer["id"]) for layer in _layers(db, capsys)}
    assert session.llm("and now?") == "ok"  # the next prompt the agent sends
    made = [x for x in session.engine.layers() if x.id not in known]
    said = [(m.kind, m.covers, m.first) for m in facts.again]
    assert said == [(x.kind, len(x.covers), x.covers[0]) for x in made]
    reasons = {layer["id"]: layer["reason"] for layer in _layers(db, capsys)}
    assert [reasons[x.id] for x in made] == [f"after rollback of {oldest['id']}"] * len(made)
    if said:
        assert "do not all fit" in printed and all(m.first in printed for m in facts.again)
    else:
        assert "shown whole" in printed
    assert (budget == 60_000) == (not said)
    session.close()
