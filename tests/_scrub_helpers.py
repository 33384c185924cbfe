"""A secret in a live session and ``openprogram scrub`` run in a process of its own: what
the scrub tests share (imported as a top-level module)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from openprogram import Session
from openprogram.testing import TestModel

# Matches no default pattern: only a scrub (not redaction) can take it out.
SECRET = "hunter2-internal-XQ7Z-9981-correcthorse"
ROOT = Path(__file__).resolve().parents[1]
CLI = "import sys; from openprogram.cli import run; sys.argv[0] = 'openprogram'; run()"


def scrub_elsewhere(db: Path) -> str:
    """``openprogram scrub`` in a process of its own, as an operator runs it."""
    done = subprocess.run(
        [sys.executable, "-c", CLI, "--db", str(db), "scrub", "s", "--pattern", SECRET],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=db.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "scrubbed session s" in done.stdout
    return done.stdout


def leaky(db: Path, model: TestModel) -> tuple[Session, str]:
    """A session whose history holds the secret in a message and a large tool output."""

    def fetch() -> str:
        """Fetch the deploy log."""
        return f"log: {SECRET}\n" + "line\n" * 4_000

    s = Session(str(db), "s", model=model, system="You deploy.", budget=8_000)
    s.llm(f"deploy with {SECRET}", tools=[fetch])
    tool = next(n for n in s.graph.nodes() if n.kind == "tool")
    return s, tool.id
