"""The command runs as a module too (``python -m openprogram`` and ``python -m openprogram.cli``),
where no console script is on PATH: it used to exit 0 and print nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["openprogram", "openprogram.cli"])
def test_the_command_runs_as_a_module(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "usage: openprogram" in done.stdout and "bench" in done.stdout


def test_a_bad_command_as_a_module_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "openprogram", "no-such-command"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "no-such-command" in done.stderr
