"""``openprogram bench --scale``: how appending, reopening, refreshing and rendering scale.

Builds a session of ``nodes`` nodes (and one of 1,000 as the baseline the render after an
append is compared with), then measures each step in a fresh process (``_scale_steps``),
so each peak of memory is that step's own and nothing is warm that a restarted agent
would not have. Each figure is held to its goal as a ratio to plain ``sqlite3`` doing the
same work with the same rows in the same run (inserting them in one transaction; reading
them back and decoding them), so the table means the same on a fast and a slow machine.
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
                "raw_path": str(Path(folder) / f"raw-{size}.db"),
            }
            steps: dict[str, Any] = {}
            for step in ("raw", "append", "reopen", "cold", "render"):
                if progress is not None:
                    progress(f"{size:,} nodes: {step}")
                steps[step] = _run_step(step, args)
            figures[str(size)] = steps
            if url is not None:
                _fresh_session(target, session)  # leave a shared database as it was
        figures["nodes"] = nodes
    return figures


def goals(figures: dict[str, Any]) -> list[Goal]:
    """The table's rows: each step against its goal, as a ratio to what plain ``sqlite3``
    does with the same rows in the same run (machines differ; ratios travel)."""
    nodes = figures["nodes"]
    big, small = figures[str(nodes)], figures[str(BASELINE_NODES)]
    raw = big["raw"]
    append_ms = big["render"]["append_render_ms"]
    baseline_ms = small["render"]["append_render_ms"]
    peak = max(big[step]["peak_mb"] for step in ("append", "reopen", "render"))
    per_node_kb = peak * 1024 / nodes
    append = big["append"]["seconds"] / raw["append_seconds"]
    reopen = big["reopen"]["seconds"] / raw["read_seconds"]
    cold = big["cold"]["cpu_seconds"] / raw["read_cpu_seconds"]
    turn = append_ms / baseline_ms
    layers = big["cold"]["layers_made"]
    return [
        Goal(f"append {nodes:,} nodes in one batch()", append, "× raw insert", "≤ 3×", append <= 3),
        Goal(
            f"reopen a {big['reopen']['nodes']:,}-node session",
            reopen,
            "× raw read + decode",
            "≤ 3×",
            reopen <= 3,
        ),
        Goal(
            "peak RSS per node (append, reopen, render)",
            per_node_kb,
            "KB",
            "≤ 3 KB",
            per_node_kb <= 3,
        ),
        Goal(
            "first render ever, CPU (no saved state)",
            cold,
            "× raw read + decode",
            "≤ 2×",
            cold <= 2,
        ),
        Goal("layers the first render ever made", layers, "layers", "≤ 10", layers <= 10),
        Goal(
            "render after one more append",
            turn,
            f"× the {BASELINE_NODES:,}-node case",
            "≤ 2×",
            turn <= 2,
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
    """The absolute figures behind the ratios."""
    big = figures[str(figures["nodes"])]
    raw = big["raw"]
    small = figures[str(BASELINE_NODES)]
    return [
        (
            "append",
            f"{big['append']['seconds']:.2f} s ({big['append']['nodes_per_s']:,.0f} nodes/s); "
            f"raw insert {raw['append_seconds']:.2f} s",
        ),
        (
            "reopen",
            f"{big['reopen']['seconds']:.2f} s; raw read + decode {raw['read_seconds']:.2f} s",
        ),
        (
            "first render ever (no saved state)",
            f"{big['cold']['seconds']:.2f} s wall, {big['cold']['cpu_seconds']:.2f} s CPU, "
            f"peak {big['cold']['peak_mb']:.0f} MB; raw read CPU {raw['read_cpu_seconds']:.2f} s",
        ),
        ("first render of a fresh engine (saved state)", f"{big['render']['seconds']:.2f} s"),
        (
            "render after one more append",
            f"{big['render']['append_render_ms']:.2f} ms; "
            f"{small['render']['append_render_ms']:.2f} ms at {BASELINE_NODES:,}",
        ),
        ("RSS after reopen", f"{big['reopen']['rss_mb']:.0f} MB"),
        (
            "peak RSS",
            f"append {big['append']['peak_mb']:.0f} MB, render {big['render']['peak_mb']:.0f} MB",
        ),
    ]


def to_json(figures: dict[str, Any]) -> dict[str, Any]:
    return {
        "db": figures["db"],
        "nodes": figures["nodes"],
        "goals": [row._asdict() for row in goals(figures)],
        "steps": {k: v for k, v in figures.items() if k not in ("db", "nodes")},
    }
