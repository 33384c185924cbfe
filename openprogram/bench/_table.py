"""Presenting bench rows: a rich table for people, JSONL for machines and later comparison."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from openprogram._reports._tables import Grid
from openprogram.bench._metrics import TraceMetrics

_NONE = "—"


def _share(value: float | None) -> str:
    return _NONE if value is None else f"{value:.1%}"


def _ratio(digits: int) -> Callable[[float | None], str]:
    def show(value: float | None) -> str:
        return _NONE if value is None else f"{value:.{digits}f}"

    return show


def _count(value: float | None) -> str:
    if value is None:
        return _NONE
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


# (header, field, formatter); trace, policy and the budget/turn columns are handled separately.
_COLUMNS: list[tuple[str, str, Callable[[float | None], str]]] = [
    ("bad pairs", "bad_pairs", _count),
    ("task kept", "task_kept", _share),
    ("request kept", "request_kept", _share),
    ("ref recall", "ref_recall", _ratio(3)),
    ("prefix reuse", "prefix_reuse", _ratio(3)),
    ("util", "util", _ratio(2)),
    ("tokens sent", "sent_tokens", _count),
    ("summ calls", "summarizer_calls", _count),
    ("summ tokens", "summarizer_tokens", _count),
    ("cost (cache-weighted tokens)", "cost", _count),
    ("cost / native", "cost_vs_native", _ratio(2)),
    ("cost / harness", "cost_vs_harness", _ratio(2)),
    ("emergency", "emergency_share", _share),
    ("p50 ms", "ms_p50", _ratio(2)),
    ("p99 ms", "ms_p99", _ratio(2)),
]


def _errors(row: TraceMetrics | tuple[float | None, float | None]) -> str:
    raw, anchored = row if isinstance(row, tuple) else (row.usage_mape, row.usage_mape_anchored)
    return _NONE if raw is None or anchored is None else f"{raw:.1%} → {anchored:.1%}"


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def format_table(rows: Sequence[TraceMetrics], *, title: str = "openprogram bench") -> Grid:
    """One row per trace and policy (grouped by trace, in the order given), then one mean row per
    policy. Means skip ``None`` figures, so a trace that never exceeded the budget does not drag
    task kept or utilization towards zero; over-budget reads "k/n traces over" there, because a
    single over-budget turn is already a failure. An anchored run adds the estimate's error
    against the provider's counts, before → after anchoring.

    The result fits the console it is printed on: numbers are never cut, trace names wrap,
    and a narrow console gets the columns in parts, each with trace and policy."""
    anchored = any(row.usage_turns is not None for row in rows)
    table = Grid(title)
    table.column("trace", "id", key=True)  # file names: whole, never cut or wrapped
    table.column("policy", "id", key=True)
    table.column("turns", "number")
    table.column("over budget", "number")
    for header, _, _ in _COLUMNS:
        table.column(header, "number")
    if anchored:
        table.column("est. error raw → anchored", "number")

    traces: dict[str, list[TraceMetrics]] = {}
    policies: dict[str, list[TraceMetrics]] = {}
    for row in rows:
        traces.setdefault(row.trace, []).append(row)
        policies.setdefault(row.policy, []).append(row)

    for trace_rows in traces.values():
        for row in trace_rows:
            cells = [fmt(getattr(row, field)) for _, field, fmt in _COLUMNS]
            if anchored:
                cells.append(_errors(row))
            table.row(row.trace, row.policy, str(row.turns), str(row.over_budget), *cells)
    if policies:
        table.section()
    for policy, policy_rows in policies.items():
        n = len(policy_rows)
        over = sum(1 for row in policy_rows if row.over_budget > 0)
        cells = [
            fmt(_mean([getattr(row, field) for row in policy_rows])) for _, field, fmt in _COLUMNS
        ]
        if anchored:
            raw = _mean([row.usage_mape for row in policy_rows])
            cells.append(_errors((raw, _mean([row.usage_mape_anchored for row in policy_rows]))))
        turns = _count(_mean([row.turns for row in policy_rows]))
        table.row(f"mean of {n}", policy, turns, f"{over}/{n} traces over", *cells, style="bold")
    return table


def to_jsonl(rows: Sequence[TraceMetrics]) -> str:
    """One JSON object per line (keys in :meth:`TraceMetrics.to_json` order), newline-terminated."""
    return "".join(json.dumps(row.to_json(), ensure_ascii=False) + "\n" for row in rows)
