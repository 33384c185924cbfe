"""An adapter's build sets the objects the process holds aside from full garbage
collections (issue 35, item 4: a full collection over a framework's imports made the
first request through Pydantic AI cost hundreds of milliseconds), once per process, and
``OPENPROGRAM_GC_FREEZE=0`` turns it off. Each case runs in a fresh process: a freeze is
for the process's life."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[3]
BUILDS = {
    "pydantic_ai": "from openprogram.integrations.pydantic_ai import OpenProgramCapability as A",
    "langchain": "from openprogram.integrations.langchain import OpenProgramMiddleware as A",
    "openai_agents": "from openprogram.integrations.openai_agents import OpenProgramSession as A",
}
MODULES = {"pydantic_ai": "pydantic_ai", "langchain": "langchain", "openai_agents": "agents"}


def _frozen_counts(framework: str, db: Path, freeze: str | None) -> list[int]:
    """The collector's frozen object count before the build, after it, and after a second."""
    script = "; ".join(
        [
            "import gc, sys",
            BUILDS[framework],
            "from openprogram import Session",
            "counts = [gc.get_freeze_count()]",
            f"A(Session({str(db)!r}, 'one'))",
            "counts.append(gc.get_freeze_count())",
            f"A(Session({str(db)!r}, 'two'))",
            "counts.append(gc.get_freeze_count())",
            "print(*counts)",
        ]
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("OPENPROGRAM_GC_FREEZE", None)
    if freeze is not None:
        env["OPENPROGRAM_GC_FREEZE"] = freeze
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env
    )
    return [int(n) for n in done.stdout.split()]


@pytest.mark.parametrize("framework", sorted(BUILDS))
def test_the_first_adapter_built_freezes_the_process_once(tmp_path: Path, framework: str) -> None:
    pytest.importorskip(MODULES[framework])
    before, first, second = _frozen_counts(framework, tmp_path / "op.db", None)
    assert before == 0 and first > 10_000  # the framework's imports, at least
    assert second == first  # once: what the second adapter's build made stays collectable


def test_the_freeze_is_turned_off_by_the_environment(tmp_path: Path) -> None:
    pytest.importorskip("pydantic_ai")
    assert _frozen_counts("pydantic_ai", tmp_path / "op.db", "0") == [0, 0, 0]
