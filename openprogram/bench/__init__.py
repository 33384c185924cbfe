"""The measuring core of ``openprogram bench``: per-turn prompts in, per-trace figures out.

The replay driver renders the context before every real assistant turn of a trace under each
policy and collects :class:`Turn` values; :func:`compute_metrics` turns them into one
:class:`TraceMetrics` row, and :func:`format_table` / :func:`to_jsonl` present the rows. The
baselines, :func:`observation_masking` and :func:`trim_baseline`, are policies like any other, and
so are the library peers (:data:`PEERS`: pydantic-ai-harness and LangChain's context editing,
run through their own code). :func:`iter_messages` makes the synthetic coding-agent session
``bench --scale`` measures, for benchmarks of your own.
"""

from context import tool_pair_problems
from openprogram._errors import BaselineUnavailable, BenchError
from openprogram.bench._baselines import (
    from_langchain,
    observation_masking,
    to_langchain,
    trim_baseline,
)
from openprogram.bench._charge import Charged
from openprogram.bench._losses import identifier_losses
from openprogram.bench._metrics import (
    TraceMetrics,
    Turn,
    cache_cost,
    compute_metrics,
    estimate_errors,
    identifiers,
    message_text,
    percentile,
    reported_input,
    with_cost_ratios,
    with_native_ratio,
)
from openprogram.bench._peers import PEERS, HarnessReplay, LangChainClear, make_peer
from openprogram.bench._program_rows import demo_row, program_row, request_shown, rows_of
from openprogram.bench._programs import Program, Sent, generate_program, run_program
from openprogram.bench._pydantic_ai import from_pydantic_ai, to_pydantic_ai, tool_names
from openprogram.bench._replay import (
    POLICIES,
    MessageCounter,
    Trace,
    load_trace,
    native_prompt,
    our_policies,
    run_policy,
    trace_files,
    trace_names,
)
from openprogram.bench._scale_steps import iter_messages
from openprogram.bench._table import format_table, to_jsonl

__all__ = [
    "PEERS",
    "POLICIES",
    "BaselineUnavailable",
    "BenchError",
    "Charged",
    "HarnessReplay",
    "LangChainClear",
    "MessageCounter",
    "Program",
    "Sent",
    "Trace",
    "TraceMetrics",
    "Turn",
    "cache_cost",
    "compute_metrics",
    "demo_row",
    "estimate_errors",
    "format_table",
    "from_langchain",
    "from_pydantic_ai",
    "generate_program",
    "identifier_losses",
    "identifiers",
    "iter_messages",
    "load_trace",
    "make_peer",
    "message_text",
    "native_prompt",
    "observation_masking",
    "our_policies",
    "percentile",
    "program_row",
    "reported_input",
    "request_shown",
    "rows_of",
    "run_policy",
    "run_program",
    "to_jsonl",
    "to_langchain",
    "to_pydantic_ai",
    "tool_names",
    "tool_pair_problems",
    "trace_files",
    "trace_names",
    "trim_baseline",
    "with_cost_ratios",
    "with_native_ratio",
]
