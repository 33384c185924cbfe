"""``openprogram bench --scale``: its options and its table (the bench is ``bench._scale``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rich.console import Console

from openprogram._cli._common import UsageError, console, print_json
from openprogram._errors import BenchError
from openprogram._reports._tables import Grid

if TYPE_CHECKING:
    from openprogram.bench._scale import Goal

DEFAULT_NODES = (100_000,)


def add_options(bench: argparse.ArgumentParser) -> None:
    bench.add_argument(
        "--scale",
        action="store_true",
        help="measure append, reopen, refresh and render on large sessions, as ratios to "
        "plain sqlite3 in the same run (--db: where; default a temporary SQLite file)",
    )
    bench.add_argument(
        "--nodes",
        type=_sizes,
        default=DEFAULT_NODES,
        metavar="N[,N…]",
        help="session sizes for --scale, e.g. 100000,1000000 (default 100000)",
    )
    bench.add_argument(
        "--steps",
        type=_names,
        metavar="STEP[,STEP…]",
        help="the --scale steps to run: append, reopen, cold (the first render ever), "
        "render (from saved state, then after one more append); default all",
    )
    bench.add_argument(
        "--step-timeout",
        type=float,
        metavar="SECONDS",
        help="stop a --scale step that runs longer (its row says so; default no limit)",
    )


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part.replace("_", "")) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected sizes like 100000,1000000") from None
    if not sizes:
        raise argparse.ArgumentTypeError("expected at least one size")
    return sizes


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def bench_scale(args: argparse.Namespace) -> int:
    from openprogram.bench._scale import MIN_NODES, chosen_steps, extras, goals, measure, to_json

    sizes: tuple[int, ...] = args.nodes if isinstance(args.nodes, tuple) else (args.nodes,)
    if min(sizes) < MIN_NODES:
        raise UsageError(f"--nodes must be at least {MIN_NODES}")
    if args.step_timeout is not None and args.step_timeout <= 0:
        raise UsageError("--step-timeout must be a positive number of seconds")
    try:
        steps = chosen_steps(args.steps)
    except BenchError as error:
        raise UsageError(f"--steps: {error}") from None
    url = getattr(args, "db", None)
    status = Console(stderr=True)
    with status.status("scale bench") as shown:
        figures = measure(
            url,
            sizes,
            lambda what: shown.update(f"scale bench: {what}"),
            steps=steps,
            timeout=args.step_timeout,
        )
    if args.json:
        print_json(to_json(figures))
        return 0
    rows = goals(figures)
    sizes_run: list[int] = figures["sizes"]
    table = Grid(f"scale on {figures['db']}: ratios to plain sqlite3 in the same run")
    table.column("figure", key=True)
    table.column("goal")
    for size in sizes_run:
        table.column(f"{size:,} nodes", "number")
    per_size = len(rows) // len(sizes_run)
    for index in range(per_size):
        group = rows[index::per_size]
        table.row(f"{group[0].step} ({group[0].unit})", group[0].goal, *map(_cell, group))
    console.print(table)
    for name, value in extras(figures):
        console.print(f"{name}: {value}")
    return 0


def _cell(row: Goal) -> str:
    if row.value is None:
        return row.note
    value = f"{row.value:,.0f}" if row.unit == "layers" else f"{row.value:,.2f}"
    return f"{value} {'yes' if row.met else 'NO'}"
