"""Bench: replay many traces under our policies, the baselines and the peers, and report."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress

from openprogram._cli._common import (
    UsageError,
    common_options,
    console,
    encoding,
    errors,
    token_budget,
)
from openprogram._cli._scale import add_options as add_scale_options
from openprogram._cli._scale import bench_scale
from openprogram._errors import OpenProgramError
from openprogram._reports._tables import Grid

SMALL_SET = ("claude-code", "mini-swe-agent", "swe-agent")
"""The folders of ``../shared/traces`` the bench runs when given no traces and no ``--split``:
the small set every quick check uses (the ``-more`` folders are for ``--split``)."""


def _default_traces(whole: bool = False) -> list[Path]:
    """``../shared/traces`` (searched upwards from here): its small set, or all of it."""
    for base in (Path.cwd(), *Path.cwd().parents):
        candidate = base / "shared" / "traces"
        if candidate.is_dir():
            if whole:
                return [candidate]
            return [candidate / name for name in SMALL_SET if (candidate / name).is_dir()]
    return []


def _traces(args: argparse.Namespace, default: bool = True) -> list[tuple[Path, str]]:
    """The bench's traces with their names: those given (or the default), and with
    ``--split``, only those of ``--half``."""
    from openprogram.bench import trace_files, trace_names
    from openprogram.bench._split import half_of, read_split

    if args.half is not None and args.split is None:
        raise UsageError("--half needs --split FILE (the file that says which traces are in it)")
    if args.split is not None and args.half is None:
        raise UsageError("--split needs --half tune or --half report")
    inputs = [Path(p) for p in args.traces]
    if not inputs and default:
        inputs = _default_traces(whole=args.split is not None)
    paths = trace_files(inputs) if inputs else []
    if args.split is None:
        return list(zip(paths, trace_names(inputs, paths), strict=True))
    return half_of(read_split(Path(args.split)), args.half, paths)


def cmd_bench(args: argparse.Namespace) -> int:
    if args.scale:
        return bench_scale(args)
    if args.losses:
        return _bench_losses(args)
    from openprogram.bench import (
        POLICIES,
        BaselineUnavailable,
        MessageCounter,
        Turn,
        format_table,
        load_trace,
        run_policy,
        to_jsonl,
        with_cost_ratios,
    )

    traces = _traces(args, default=not args.programs)
    if not traces and not args.programs:
        raise OpenProgramError("no traces given and ../shared/traces was not found")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise UsageError(f"unknown policies {unknown}; known: {', '.join(POLICIES)}")
    budgets = args.budget or [32_000]
    counter = MessageCounter(args.encoding)
    overrides = _settings(args.set)
    summarizer = None
    if args.summarizer:
        from context import LiteLLMSummarizer

        summarizer = LiteLLMSummarizer(args.summarizer)
    judge = None
    if args.behaviour_turns < 1:
        raise UsageError(f"--behaviour-turns must be at least 1, got {args.behaviour_turns}")
    if args.behaviour:
        from openprogram._runtime._current import MODEL
        from openprogram._runtime._models import resolve_model

        judge = MODEL.get() or resolve_model(args.behaviour)  # testing.override's fake judge
    rows = []
    behaviour: list[Any] = []
    missing: dict[str, str] = {}
    with Progress(console=Console(stderr=True), transient=True) as progress:
        if args.programs:
            rows += _program_rows(args, policies, counter, progress)
        task = progress.add_task("bench", total=len(traces) * len(policies) * len(budgets))
        for path, name in traces:
            trace = load_trace(path, name=name)
            for budget in budgets:
                for policy in policies:
                    if policy in missing:
                        progress.advance(task)
                        continue
                    turns: list[Turn] = []
                    try:
                        row = run_policy(
                            trace,
                            policy,
                            budget,
                            counter,
                            anchored=args.anchored,
                            summarizer=summarizer,
                            overrides=overrides,
                            on_turn=turns_into(turns) if judge else None,
                        )
                    except BaselineUnavailable as error:
                        missing[policy] = str(error)
                        row = None
                    if row is not None:
                        rows.append(row)
                        if judge is not None:
                            behaviour.append(
                                _behaviour(judge, turns, trace.name, policy, budget, args)
                            )
                    progress.advance(task)
    for policy, why in missing.items():
        errors.print(f"[yellow]skipped {policy}:[/] {escape(why)}")
    rows = with_cost_ratios(rows)
    if args.json:
        sys.stdout.write(to_jsonl(rows))
        for found in behaviour:
            sys.stdout.write(json.dumps({"behaviour": msgspec.to_builtins(found)}) + "\n")
    else:
        console.print(format_table(rows))
        if behaviour:
            console.print(_behaviour_table(behaviour, str(args.behaviour)))
    return 0


PROGRAM_BUDGETS = (1_500, 2_200, 4_000, 8_000)
"""The budgets ``--programs`` runs at unless ``--budget`` is given: from near the floor up."""


def _program_rows(
    args: argparse.Namespace, policies: list[str], counter: Any, progress: Progress
) -> list[Any]:
    """The runtime's rows: the demo at each budget, then each generated program under each
    of our presets at each budget (run through ``Session``)."""
    from openprogram.bench import our_policies
    from openprogram.bench._program_rows import demo_row, program_row

    budgets = args.budget or list(PROGRAM_BUDGETS)
    ours = [p for p in policies if p in our_policies()]
    seeds = _seeds(args.seeds)
    task = progress.add_task("programs", total=len(budgets) * (1 + len(seeds) * len(ours)))
    rows = []
    for budget in budgets:
        rows.append(demo_row(budget, counter))
        progress.advance(task)
    for seed in seeds:
        for budget in budgets:
            for policy in ours:
                rows.append(program_row(seed, policy, budget, counter))
                progress.advance(task)
    return rows


def _seeds(text: str) -> list[int]:
    """``--seeds``: numbers and ranges, e.g. ``1-8`` or ``1,5,9-12``."""
    seeds: list[int] = []
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        try:
            seeds += range(int(first), int(last) + 1) if dash else [int(first)]
        except ValueError:
            raise UsageError(f"--seeds {text!r}: expected numbers and ranges, e.g. 1-8") from None
    return seeds


def _bench_losses(args: argparse.Namespace) -> int:
    """Per trace: the identifier uses ``--losses PEER``'s prompts held and each of our
    policies' did not, by cause."""
    from openprogram.bench import MessageCounter, load_trace, our_policies
    from openprogram.bench._losses import identifier_losses

    traces = _traces(args)
    ours = [p.strip() for p in args.policies.split(",") if p.strip() in our_policies()]
    if not ours:
        raise UsageError(f"--losses compares our policies ({', '.join(our_policies())})")
    counter = MessageCounter(args.encoding)
    table = Grid(f"identifier uses {args.losses} held and ours did not, by cause")
    table.column("trace", "id", key=True)
    table.column("policy", key=True)
    table.column("lost", "number")
    table.column("causes")
    for budget in args.budget or [32_000]:
        for path, name in traces:
            trace = load_trace(path, name=name)
            for policy in ours:
                causes = identifier_losses(
                    trace, policy, args.losses, budget, counter, _settings(args.set)
                )
                shown = "; ".join(f"{n} {cause}" for cause, n in causes.most_common())
                table.row(name, policy, str(sum(causes.values())), shown or "—")
    console.print(table)
    return 0


def turns_into(turns: list[Any]) -> Any:
    """An ``on_turn`` that keeps each turn in ``turns``."""

    def keep(turn: Any, _fired: list[str]) -> None:
        turns.append(turn)

    return keep


def _behaviour(
    judge: Any, turns: list[Any], trace: str, policy: str, budget: int, args: argparse.Namespace
) -> Any:
    from openprogram.bench._behaviour import check

    return check(
        turns, judge, trace=trace, policy=policy, budget=budget, samples=args.behaviour_turns
    )


def _behaviour_table(rows: list[Any], model: str) -> Grid:
    table = Grid(f"next action, full history vs compacted prompt ({model})")
    table.column("trace", "id", key=True)
    table.column("policy", key=True)
    for column in ("budget", "turns", "agree", "full = real", "ours = real", "calls", "tokens in"):
        table.column(column, "number")

    def share(value: float | None) -> str:
        return "–" if value is None else f"{value:.0%}"

    for row in rows:
        table.row(
            row.trace,
            row.policy,
            f"{row.budget:,}",
            f"{row.sampled}" + (f" ({row.failed} failed)" if row.failed else ""),
            share(row.agreement),
            share(row.full_vs_real),
            share(row.compacted_vs_real),
            f"{row.calls:,}",
            f"{row.tokens_in:,}",
        )
    return table


def _settings(pairs: Sequence[str] | None) -> dict[str, object]:
    """``--set field=value`` pairs as policy overrides (values parsed as JSON when they can)."""
    values: dict[str, object] = {}
    for pair in pairs or ():
        field, sep, text = pair.partition("=")
        if not sep or not field:
            raise UsageError(f"--set {pair!r}: expected FIELD=VALUE, e.g. low_water=0.7")
        try:
            values[field.strip()] = json.loads(text)
        except json.JSONDecodeError:
            values[field.strip()] = text
    return values


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = common_options()
    bench = sub.add_parser(
        "bench", parents=[common], help="replay traces under policies and baselines"
    )
    bench.add_argument(
        "traces",
        nargs="*",
        help="trace files or folders (default: ../shared/traces's small set, "
        f"{', '.join(SMALL_SET)}; all of it with --split)",
    )
    bench.add_argument(
        "--split",
        metavar="FILE",
        help="a file that puts each trace in a half ('<half> <path>' lines, e.g. "
        "bench-notes/split.txt); the bench runs only --half's traces",
    )
    bench.add_argument(
        "--half",
        choices=("tune", "report"),
        help="with --split: choose defaults on tune; run report only to report",
    )
    bench.add_argument(
        "--budget",
        type=token_budget,
        action="append",
        help="a token budget (repeatable; default 32000)",
    )
    bench.add_argument(
        "--policies",
        default="none,native,masking,trim,harness,langchain-clear,langchain-clear-trim,"
        "claude-code,progressive",
        help="comma-separated: our presets, the baselines and the peers to compare",
    )
    bench.add_argument(
        "--summarizer", help="a litellm model for our policies' summaries (default: heuristic)"
    )
    bench.add_argument(
        "--set",
        action="append",
        metavar="FIELD=VALUE",
        help="override a policy field, e.g. --set identifier_tokens=0 (repeatable)",
    )
    bench.add_argument("--encoding", default="cl100k_base", type=encoding)
    bench.add_argument("--json", action="store_true")
    add_scale_options(bench)
    bench.add_argument(
        "--losses",
        metavar="PEER",
        help="per trace, the identifiers PEER's prompts held and our policies' did not, by cause",
    )
    bench.add_argument(
        "--programs",
        action="store_true",
        help="also run the runtime: the demo and generated nested agent programs through "
        "Session (budgets 1500, 2200, 4000, 8000 unless --budget is given)",
    )
    bench.add_argument(
        "--seeds",
        default="1-8",
        help="the generated programs' seeds for --programs: numbers and ranges (default 1-8)",
    )
    bench.add_argument(
        "--anchored",
        action="store_true",
        help="anchor token estimates on the usage the trace recorded, and report their error",
    )
    bench.add_argument(
        "--behaviour",
        metavar="MODEL",
        help="also ask MODEL (a litellm name) for the agent's next action from the full "
        "history and from each policy's prompt on sampled turns, and report how often they "
        "agree (two calls per sampled turn, one with the whole history)",
    )
    bench.add_argument(
        "--behaviour-turns",
        type=int,
        default=8,
        metavar="N",
        help="turns sampled per trace and policy for --behaviour (default 8)",
    )
    bench.set_defaults(run=cmd_bench)
