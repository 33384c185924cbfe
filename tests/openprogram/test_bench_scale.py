"""``openprogram bench --scale`` on a small session: the shape of what it reports (its
figures are measurements, so no test holds them to a goal). The bench runs once; the
table and the JSON are both made from that run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import openprogram.bench._scale as scale
from graph import SQLStore, dispose_engines
from openprogram._cli import main

STEPS = {"raw", "append", "reopen", "cold", "render"}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    db = tmp_path_factory.mktemp("scale") / "scale.db"
    figures = scale.measure(str(db), 2000)
    dispose_engines()
    return db, figures


def test_scale_bench_json_shape(
    run: tuple[Path, dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db, figures = run
    monkeypatch.setattr(scale, "measure", lambda url, nodes, progress=None: figures)
    assert main(["--db", str(db), "bench", "--scale", "--nodes", "2000", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["db"] == "sqlite" and report["nodes"] == 2000
    assert [row["unit"] for row in report["goals"]] == [
        "× raw insert",
        "× raw read + decode",
        "KB",
        "× raw read + decode",
        "layers",
        "× the 1,000-node case",
        "ms",
    ]
    for row in report["goals"]:
        assert set(row) == {"step", "value", "unit", "goal", "met"}
        assert row["value"] >= 0 and isinstance(row["met"], bool)
    assert set(report["steps"]) == {"1000", "2000"}
    for size, steps in report["steps"].items():
        assert set(steps) == STEPS
        assert steps["append"]["nodes"] >= int(size)
        assert steps["reopen"]["nodes"] == steps["append"]["nodes"]
        assert steps["render"]["tokens"] <= 32_000 and steps["render"]["messages"] > 0
        assert steps["render"]["append_render_ms"] > 0
        assert steps["raw"]["nodes"] == steps["append"]["nodes"] == steps["raw"]["edges"] + 1
        assert steps["raw"]["read_cpu_seconds"] > 0 and steps["cold"]["cpu_seconds"] > 0
        for step in steps.values():
            assert step["peak_mb"] >= step["rss_mb"] > 0
    left = [s.id for s in SQLStore(db).sessions() if s.id.startswith("scale-")]
    assert left == []  # a database given with --db is left as it was


def test_scale_bench_table(
    run: tuple[Path, dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(scale, "measure", lambda url, nodes, progress=None: run[1])
    assert main(["bench", "--scale", "--nodes", "2000"]) == 0
    out = capsys.readouterr().out
    for words in ("append 2,000 nodes", "reopen", "peak RSS", "first render", "× raw", "refresh()"):
        assert words in out
    assert main(["bench", "--scale", "--nodes", "3"]) == 2
