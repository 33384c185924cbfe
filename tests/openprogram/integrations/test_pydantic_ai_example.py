"""The example ``openprogram.examples.pydantic_ai_rollback`` runs offline: a Pydantic AI
agent compacts through the capability, and a rollback from our side shows the originals in
the follow-up's request."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai")

from openprogram import Session
from openprogram.examples.pydantic_ai_rollback import FOLLOW_UP, main


def test_the_example_rolls_back_a_compaction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "op.db"
    report = main(db, state_dir=tmp_path / "state")
    assert report["answer"].startswith("I read export-code")
    assert "collapse" in report["tiers"] and report["rolled_back"] in report["layers"]
    assert report["restored"] is True
    assert "shows its originals again: True" in capsys.readouterr().out
    session = Session(db, report["session"])
    rolled = session.graph.layer(report["rolled_back"])
    assert not rolled.active and rolled.reason == "look at the originals again"
    assert any(n.role == "user" and n.payload.content == FOLLOW_UP for n in session.graph.nodes())  # type: ignore[union-attr]


def test_the_example_runs_as_a_script(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "openprogram.examples.pydantic_ai_rollback",
            "--db",
            str(tmp_path / "op.db"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert "shows its originals again: True" in done.stdout
