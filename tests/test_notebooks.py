"""The notebooks in ``notebooks/`` execute from top to bottom the way a person runs them
(outputs are not committed), show every figure they promise, and use only public API."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
PRIVATE = re.compile(
    r"\._\w|\bfrom \w+(?:\.\w+)*\._|\bopenprogram\.bench\b|\bopenprogram\.examples\b"
)


def _read(path: Path) -> Any:
    import nbformat

    return nbformat.read(path, as_version=4)


def test_there_are_the_two_notebooks() -> None:
    assert [p.name for p in NOTEBOOKS] == ["replay_and_rollback.ipynb", "research_agent.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebooks_use_only_public_api(path: Path) -> None:
    for cell in _read(path).cells:
        if cell.cell_type == "code":
            found = PRIVATE.search(cell.source)
            assert found is None, f"{path.name}: {found.group(0)!r} is not public API"
            assert 'matplotlib.use("Agg")' not in cell.source  # it would hide every figure


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_and_shows_its_figures(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nbclient import NotebookClient

    book = _read(path)
    for cell in book.cells:
        if cell.cell_type == "code":
            assert not cell.get("outputs"), f"{path.name}: outputs must not be committed"
    figures = [c for c in book.cells if "figure" in c.get("metadata", {}).get("tags", [])]
    assert figures, f"{path.name} promises no figure"
    env = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), env) if p))
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.delenv("MPLBACKEND", raising=False)
    client = NotebookClient(
        book, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    errors = [
        output
        for cell in book.cells
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert not errors
    for cell in figures:
        images = [
            output
            for output in cell.get("outputs", [])
            if output.get("output_type") == "display_data" and "image/png" in output.get("data", {})
        ]
        assert images, f"{path.name}: the figure cell shows no image:\n{cell.source[:200]}"


def test_the_notebooks_extra_installs_jupyter_and_the_readme_says_how_to_open_them() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"]["notebooks"]
    assert {re.split(r"[<>=\[]", r)[0] for r in extra} >= {"jupyterlab", "matplotlib"}
    for readme in (ROOT / "README.md", ROOT / "notebooks" / "README.md"):
        text = readme.read_text()
        assert "'.[notebooks]'" in text and "jupyter lab notebooks/" in text
    assert "Until then" not in (ROOT / "notebooks" / "README.md").read_text()
