"""Every Python block of the README type-checks under ``mypy --strict`` (with the project's
configuration): a snippet a user copies is as typed as the code it shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```(?:py|python)\n(.*?)```", text, flags=re.S)


def test_the_readme_python_blocks_pass_mypy_strict(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    blocks = python_blocks(README.read_text())
    assert len(blocks) >= 4
    files = []
    for n, block in enumerate(blocks):
        path = tmp_path / f"readme_block_{n}.py"
        path.write_text(block)
        files.append(str(path))
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", "pyproject.toml", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
