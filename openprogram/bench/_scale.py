"""``openprogram bench --scale``: how appending, reopening, refreshing and rendering scale.

Builds a session of ``nodes`` nodes (and one of 1,000 as the baseline the render after an
append is compared with), then measures each step in a fresh process (``_scale_steps``),
so each peak of memory is that step's own and nothing is warm that a restarted agent
would not have. Times are wall times; the table says which goals are met.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from openprogram._errors import BenchError

BASELINE_NODES = 1_000


class Goal(NamedTuple):
    """One row of the table: what is measured, its value, and the goal it is held to."""

    step: str
    value: float
    unit: str
    goal: str
    met: bool


def _run_step(step: str, args: dict[str, Any]) -> dict[str, Any]:
    root = str(Path(__file__).resolve().parents[2])  # where openprogram, context, graph are
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "openprogram.bench._scale_steps", step, json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise BenchError(f"scale step {step!r} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _fresh_session(url: str, session: str) -> None:
    from graph import SQLStore, dispose_engines

    store = SQLStore(url)
    try:
        if store.has_session(session):
            store.delete_session(session)
    finally:
        dispose_engines()


def _normalized(url: str) -> str:
    from graph import SQLStore, dispose_engines

    try:
        return SQLStore(url).url
    finally:
        dispose_engines()


def measure(
    url: str | None, nodes: int, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Every step's figures for a session of ``nodes`` nodes and for the baseline."""
    with tempfile.TemporaryDirectory(prefix="op-scale-") as folder:
        target = _normalized(url) if url else f"sqlite:///{Path(folder) / 'scale.db'}"
        figures: dict[str, Any] = {"db": "sqlite" if target.startswith("sqlite") else "postgresql"}
        for size in (BASELINE_NODES, nodes):
            session = f"scale-{size}"
            _fresh_session(target, session)
            args = {
                "url": target,
                "session": session,
                "nodes": size,
                "state_dir": str(Path(folder) / f"state-{size}"),
            }
            steps: dict[str, Any] = {}
            for step in ("append", "reopen", "cold", "render"):
                if progress is not None:
                    progress(f"{size:,} nodes: {step}")
                steps[step] = _run_step(step, args)
            figures[str(size)] = steps
            if url is not None:
                _fresh_session(target, session)  # leave a shared database as it was
        figures["nodes"] = nodes
    return figures


def goals(figures: dict[str, Any]) -> list[Goal]:
    """The table's rows: each step against its goal."""
    nodes = figures["nodes"]
    big, small = figures[str(nodes)], figures[str(BASELINE_NODES)]
    append_ms = big["render"]["append_render_ms"]
    baseline_ms = small["render"]["append_render_ms"]
    peak = max(big[step]["peak_mb"] for step in ("append", "reopen", "render"))
    rate = big["append"]["nodes_per_s"]
    return [
        Goal(f"append {nodes:,} nodes in one batch()", rate, "nodes/s", "≥ 25,000", rate >= 25_000),
        Goal(
            f"reopen a {big['reopen']['nodes']:,}-node session",
            big["reopen"]["seconds"],
            "s",
            "≤ 1 s",
            big["reopen"]["seconds"] <= 1.0,
        ),
        Goal("peak RSS (append, reopen, render)", peak, "MB", "≤ 300 MB", peak <= 300),
        Goal(
            "first render at 32k, fresh engine",
            big["render"]["seconds"],
            "s",
            "≤ 0.5 s",
            big["render"]["seconds"] <= 0.5,
        ),
        Goal(
            "render after one more append",
            append_ms,
            "ms",
            f"≤ 3 × {baseline_ms:.1f} ms (at {BASELINE_NODES:,})",
            append_ms <= 3 * baseline_ms,
        ),
        Goal(
            f"refresh() with nothing new, {big['reopen']['nodes']:,} nodes",
            big["reopen"]["refresh_ms"],
            "ms",
            "≤ 1 ms",
            big["reopen"]["refresh_ms"] <= 1.0,
        ),
    ]


def extras(figures: dict[str, Any]) -> list[tuple[str, str]]:
    """Figures that are not goals but explain the table."""
    big = figures[str(figures["nodes"])]
    return [
        ("first render ever (no tier state; setup)", f"{big['cold']['seconds']:.2f} s"),
        ("peak RSS of that first render", f"{big['cold']['peak_mb']:.0f} MB"),
        ("RSS after reopen", f"{big['reopen']['rss_mb']:.0f} MB"),
        ("append: peak RSS", f"{big['append']['peak_mb']:.0f} MB"),
        ("render: peak RSS", f"{big['render']['peak_mb']:.0f} MB"),
    ]


def to_json(figures: dict[str, Any]) -> dict[str, Any]:
    return {
        "db": figures["db"],
        "nodes": figures["nodes"],
        "goals": [row._asdict() for row in goals(figures)],
        "steps": {k: v for k, v in figures.items() if k not in ("db", "nodes")},
    }
