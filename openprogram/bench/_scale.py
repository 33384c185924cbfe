"""``openprogram bench --scale``: how appending, reopening, refreshing and rendering scale.

Builds a session of each size asked for (and one of 1,000 nodes as the baseline the render
after an append is compared with), then measures each step in a fresh process
(``_scale_steps``), so each peak of memory is that step's own and nothing is warm that a
restarted agent would not have. Each figure is held to its goal as a ratio to plain
``sqlite3`` doing the same work with the same rows in the same run (inserting them in one
transaction; reading them back and decoding them), so the table means the same on a fast
and a slow machine.

A step can be left out (``steps``) or given a time limit (``timeout``): a step that fails
or runs out of time is a row that says so, and the steps that need it are rows saying
they were skipped, so one slow step never costs the figures of the others.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from openprogram._errors import BenchError

BASELINE_NODES = 1_000
STEPS = ("append", "reopen", "cold", "render")
"""The steps one can choose; ``raw``, the baseline of every ratio, always runs."""
NEEDS = {"reopen": "append", "cold": "append", "render": "cold"}
"""The step each one works on: reopen and the first render read the appended session, and
the render after an append starts from the state the first render saved."""
MIN_NODES = 10


class Goal(NamedTuple):
    """One row of the table: what is measured at a size, its value (None when it could not
    be measured: ``note`` says why), and the goal it is held to."""

    nodes: int
    step: str
    value: float | None
    unit: str
    goal: str
    met: bool | None
    note: str = ""


def chosen_steps(names: Sequence[str] | None) -> tuple[str, ...]:
    """The steps to run, in their order; every step a chosen one needs must be chosen too."""
    if not names:
        return STEPS
    unknown = [name for name in names if name not in STEPS]
    if unknown:
        raise BenchError(f"unknown scale step {unknown[0]!r} (choose from {', '.join(STEPS)})")
    for name in names:
        need = NEEDS.get(name)
        if need is not None and need not in names:
            raise BenchError(f"scale step {name!r} needs {need!r}: add it to the steps")
    return tuple(step for step in STEPS if step in names)


def _run_step(step: str, args: dict[str, Any], timeout: float | None) -> dict[str, Any]:
    """The step's figures, or ``{"error": …}`` when it failed or ran out of time."""
    root = str(Path(__file__).resolve().parents[2])  # where openprogram, context, graph are
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "openprogram.bench._scale_steps", step, json.dumps(args)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return {"error": f"failed: {why[:200]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _fresh_session(url: str, session: str) -> None:
    from graph import dispose_engines, open_store

    store = open_store(url)
    try:
        if store.has_session(session):
            store.delete_session(session)
    finally:
        dispose_engines()


def _normalized(url: str) -> str:
    from graph import dispose_engines, open_store

    try:
        return open_store(url).url
    finally:
        dispose_engines()


def measure(
    url: str | None,
    sizes: int | Sequence[int],
    progress: Callable[[str], None] | None = None,
    *,
    steps: Sequence[str] | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Every chosen step's figures at each size (and at the baseline's, when the render
    after an append is measured). ``timeout``: seconds each step may take."""
    wanted = [sizes] if isinstance(sizes, int) else list(dict.fromkeys(sizes))
    if not wanted or min(wanted) < MIN_NODES:
        raise BenchError(f"every scale size must be at least {MIN_NODES} nodes")
    from graph import StoreURL

    chosen = chosen_steps(steps)
    runs = sorted({*wanted, BASELINE_NODES} if "render" in chosen else set(wanted))
    with tempfile.TemporaryDirectory(prefix="op-scale-") as folder:
        target = _normalized(url) if url else f"sqlite:///{Path(folder) / 'scale.db'}"
        figures: dict[str, Any] = {
            "db": StoreURL.parse(target).family,
            "sizes": wanted,
            "steps": list(chosen),
            "timeout": timeout,
            "runs": {},
        }
        for size in runs:
            session = f"scale-{size}"
            _fresh_session(target, session)
            args: dict[str, Any] = {
                "url": target,
                "session": session,
                "nodes": size,
                "state_dir": str(Path(folder) / f"state-{size}"),
                "raw_path": str(Path(folder) / f"raw-{size}.db"),
            }
            found: dict[str, Any] = {}
            for step in ("raw", *chosen):
                need = NEEDS.get(step)
                if need is not None and "error" in found[need]:
                    found[step] = {"error": f"skipped: {need} did not finish"}
                    continue
                if progress is not None:
                    progress(f"{size:,} nodes: {step}")
                found[step] = _run_step(step, args, timeout)
            figures["runs"][str(size)] = found
            if url is not None:
                _fresh_session(target, session)  # leave a shared database as it was
            Path(args["raw_path"]).unlink(missing_ok=True)
    return figures


class _Figure(NamedTuple):
    """How one row is worked out from a size's step figures (``run``; its ``baseline`` is
    the baseline size's render)."""

    step: str
    unit: str
    goal: str
    limit: float
    needs: tuple[str, ...]
    value: Callable[[dict[str, Any]], float]


FIGURES = (
    _Figure(
        "append in one batch()", "× raw insert", "≤ 3×", 3, ("raw", "append"),
        lambda run: run["append"]["seconds"] / run["raw"]["append_seconds"],
    ),
    _Figure(
        "reopen the session", "× raw read + decode", "≤ 3×", 3, ("raw", "reopen"),
        lambda run: run["reopen"]["seconds"] / run["raw"]["read_seconds"],
    ),
    _Figure(
        "first render ever, CPU (no saved state)", "× raw read + decode", "≤ 2×", 2,
        ("raw", "cold"),
        lambda run: run["cold"]["cpu_seconds"] / run["raw"]["read_cpu_seconds"],
    ),
    _Figure(
        "layers the first render ever made", "layers", "≤ 10", 10, ("cold",),
        lambda run: float(run["cold"]["layers_made"]),
    ),
    _Figure(
        "render after one more append", f"× the {BASELINE_NODES:,}-node case", "≤ 2×", 2,
        ("render", "baseline"),
        lambda run: run["render"]["append_render_ms"] / run["baseline"]["append_render_ms"],
    ),
    _Figure(
        "refresh() with nothing new", "ms", "≤ 1 ms", 1.0, ("reopen",),
        lambda run: float(run["reopen"]["refresh_ms"]),
    ),
)  # fmt: skip
MEMORY_STEPS = ("append", "reopen", "render")
"""The steps whose peak memory the per-node figure takes (the first render ever is being
rebuilt to cost the budget, not the history; its peak is reported beside it)."""


def _missing(run: dict[str, Any], needs: Sequence[str]) -> str | None:
    """Why a figure that needs ``needs`` has no value (None: it has one)."""
    for step in needs:
        if step not in run:
            return "not run (--steps)"
        error = run[step].get("error")
        if error is not None:
            return f"{step} {error}"
    return None


def _peak(nodes: int, run: dict[str, Any]) -> Goal:
    measured = [step for step in MEMORY_STEPS if "peak_mb" in run.get(step, {})]
    name = f"peak RSS per node ({', '.join(MEMORY_STEPS)})"  # the most of those that ran
    if not measured:
        why = _missing(run, MEMORY_STEPS[:1]) or "no step measured it"
        return Goal(nodes, name, None, "KB", "≤ 3 KB", None, why)
    per_node = max(run[step]["peak_mb"] for step in measured) * 1024 / nodes
    return Goal(nodes, name, per_node, "KB", "≤ 3 KB", per_node <= 3)


def goals(figures: dict[str, Any]) -> list[Goal]:
    """The table's rows, size by size: each step against its goal, as a ratio to what plain
    ``sqlite3`` does with the same rows in the same run (machines differ; ratios travel).
    A figure whose steps did not run, failed or ran out of time has no value and says why."""
    rows: list[Goal] = []
    baseline = figures["runs"].get(str(BASELINE_NODES), {})
    for nodes in figures["sizes"]:
        run = {
            **figures["runs"][str(nodes)],
            "baseline": baseline.get("render", {"error": "not run"}),
        }
        for figure in FIGURES:
            why = _missing(run, figure.needs)
            if why is not None:
                row = Goal(nodes, figure.step, None, figure.unit, figure.goal, None, why)
            else:
                value = figure.value(run)
                row = Goal(
                    nodes, figure.step, value, figure.unit, figure.goal, value <= figure.limit
                )
            rows.append(row)
            if figure.step.startswith("reopen"):
                rows.append(_peak(nodes, run))
    return rows


def extras(figures: dict[str, Any]) -> list[tuple[str, str]]:
    """The absolute figures behind the ratios, size by size (what was measured)."""
    found: list[tuple[str, str]] = []
    small = figures["runs"].get(str(BASELINE_NODES), {}).get("render", {})
    for nodes in figures["sizes"]:
        run = figures["runs"][str(nodes)]
        raw, append, reopen = run["raw"], run.get("append", {}), run.get("reopen", {})
        cold, render = run.get("cold", {}), run.get("render", {})
        at = f"{nodes:,}"
        if "seconds" in append and "append_seconds" in raw:
            found.append(
                (
                    f"append, {at}",
                    f"{append['seconds']:.2f} s ({append['nodes_per_s']:,.0f} nodes/s), "
                    f"peak {append['peak_mb']:.0f} MB; raw insert {raw['append_seconds']:.2f} s",
                )
            )
        if "seconds" in reopen and "read_seconds" in raw:
            found.append(
                (
                    f"reopen, {at}",
                    f"{reopen['seconds']:.2f} s, {reopen['rss_mb']:.0f} MB after; "
                    f"raw read + decode {raw['read_seconds']:.2f} s",
                )
            )
        if "seconds" in cold and "read_cpu_seconds" in raw:
            found.append(
                (
                    f"first render ever (no saved state), {at}",
                    f"{cold['seconds']:.2f} s wall, {cold['cpu_seconds']:.2f} s CPU, peak "
                    f"{cold['peak_mb']:.0f} MB; raw read CPU {raw['read_cpu_seconds']:.2f} s",
                )
            )
        if "seconds" in render:
            found.append(
                (
                    f"first render of a fresh engine (saved state), {at}",
                    f"{render['seconds']:.2f} s, peak {render['peak_mb']:.0f} MB",
                )
            )
        if "append_render_ms" in render and "append_render_ms" in small:
            found.append(
                (
                    f"render after one more append, {at}",
                    f"{render['append_render_ms']:.2f} ms; "
                    f"{small['append_render_ms']:.2f} ms at {BASELINE_NODES:,}",
                )
            )
    return found


def to_json(figures: dict[str, Any]) -> dict[str, Any]:
    return {
        "db": figures["db"],
        "sizes": figures["sizes"],
        "steps": figures["steps"],
        "timeout": figures["timeout"],
        "goals": [row._asdict() for row in goals(figures)],
        "runs": figures["runs"],
    }
