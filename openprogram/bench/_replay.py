"""Replay a trace turn by turn under each policy, and measure what each would have sent.

Turn ``t`` is every assistant message but one at position 0; its prompt is rendered from
everything before it. Our policies render from the graph with a ``ContextEngine`` (its
state carried from turn to turn, as in a live loop); the baselines work on the message list.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from context import (
    ContextEngine,
    HeuristicSummarizer,
    MessageSource,
    Policy,
    StateFolder,
    Summarizer,
    TokenCounter,
)
from graph import ChatMessage, ConversationGraph, Node, Step, seeded_ids, steps_to_messages
from openprogram.bench._baselines import observation_masking, trim_baseline
from openprogram.bench._charge import Charged
from openprogram.bench._metrics import TraceMetrics, Turn, compute_metrics, reported_input
from openprogram.bench._peers import PEERS, make_peer
from openprogram.importers import import_trace

POLICIES = (
    "none",
    "native",
    "masking",
    "trim",
    "harness",
    "langchain-clear",
    "langchain-clear-trim",
    "claude-code",
    "progressive",
    "default",
)
_OURS: dict[str, str] = {
    "claude-code": "claude-code",
    "progressive": "progressive",
    "default": "claude-code",
}
"""Our policies by bench name: the preset each runs (``default`` is ``claude-code``)."""
_SUMMARIZING = ("collapse", "compact", "summarize_half")


def our_policies() -> list[str]:
    """The names of our own cascade presets that ``bench`` can run."""
    return list(_OURS)


class MessageCounter:
    """Counts message tokens once per distinct message (keyed by its JSON bytes)."""

    def __init__(self, encoding: str = "cl100k_base") -> None:
        self.counter = TokenCounter(encoding=encoding)
        self._by_object: dict[int, tuple[ChatMessage, int]] = {}
        self._by_bytes: dict[bytes, int] = {}

    def __call__(self, message: ChatMessage) -> int:
        hit = self._by_object.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        key = msgspec.json.encode(message)
        tokens = self._by_bytes.get(key)
        if tokens is None:
            tokens = self.counter.count_message(message)
            self._by_bytes[key] = tokens
        self._by_object[id(message)] = (message, tokens)
        return tokens


@dataclass
class Trace:
    """A trace loaded for replay: the graph, its messages, and the turns to render."""

    path: Path
    graph: ConversationGraph
    messages: list[ChatMessage]
    turns: list[tuple[int, Node]]
    native: list[ChatMessage] = field(default_factory=list)
    native_index: dict[str, int] = field(default_factory=dict)
    summaries: list[int] = field(default_factory=list)
    label: str | None = None

    @property
    def name(self) -> str:
        """The label given by the bench (unique among its traces), else the file name."""
        return self.label or self.path.name

    @property
    def first_user_text(self) -> str:
        for message in self.messages:
            if message.get("role") == "user":
                content = message.get("content")
                return content if isinstance(content, str) else str(content or "")
        return ""

    @property
    def has_native(self) -> bool:
        return bool(self.summaries)


def _index(steps: Sequence[Step]) -> tuple[list[ChatMessage], dict[str, int]]:
    """Messages of a walk and, per dialogue node, the index of its message."""
    index: dict[str, int] = {}
    position = 0
    for step in steps:
        if step.view == "message":
            index[step.node.id] = position
            position += 1
        elif step.view == "tool":
            position += 1
        elif step.view == "call":
            position += 2
    return steps_to_messages(steps), index


def load_trace(
    path: Path,
    *,
    format: str | None = None,
    graph: ConversationGraph | None = None,
    name: str | None = None,
    seed: str | None = None,
) -> Trace:
    """Import a trace into ``graph`` (a new in-memory one by default) and lay out its turns;
    ``name`` labels it in the bench's rows (default: the file name).

    The import's ids are seeded (by ``seed``, default the trace's name), so a replay repeats
    its token counts exactly. Node ids are unique across a database, so a graph in a store
    that outlives the replay needs a seed of its own, such as its session id."""
    graph = graph if graph is not None else ConversationGraph.memory(session="replay")
    with seeded_ids(seed or f"import:{name or path.name}"):  # the same ids, the same counts
        import_trace(path, graph, format=format)
    root_head = graph.state.order and _root_tip(graph)
    steps = graph.visible(head=root_head or None)
    ordinary = [s for s in steps if not s.node.meta.get("native_compaction")]
    messages, index = _index(ordinary)
    turns = [
        (index[s.node.id], s.node)
        for s in ordinary
        if s.view == "message" and s.node.role == "assistant" and index[s.node.id] > 0
    ]
    trace = Trace(path, graph, messages, turns, label=name)
    if len(ordinary) != len(steps):
        trace.native, trace.native_index = _index(steps)
        trace.summaries = sorted(
            trace.native_index[s.node.id]
            for s in steps
            if s.view == "message" and s.node.meta.get("native_compaction") == "summary"
        )
    return trace


def _root_tip(graph: ConversationGraph) -> str | None:
    for node_id in reversed(graph.state.order):
        if graph.state.caller.get(node_id) is None and graph.get(node_id).kind != "tool":
            return node_id
    return None


def native_prompt(trace: Trace, node: Node) -> list[ChatMessage]:
    """What the agent itself sent: everything since its last own compaction summary."""
    end = trace.native_index[node.id]
    start = max((i for i in trace.summaries if i < end), default=None)
    window = trace.native[start:end] if start is not None else trace.native[:end]
    systems = [m for m in trace.native[: start or 0] if m.get("role") == "system"]
    return [*systems, *window]


def run_policy(
    trace: Trace,
    policy: str,
    budget: int,
    count: MessageCounter,
    *,
    on_turn: Callable[[Turn, list[str]], None] | None = None,
    state_dir: Path | StateFolder | None = None,
    policy_object: Policy | None = None,
    anchored: bool = False,
    summarizer: Summarizer | None = None,
    overrides: dict[str, Any] | None = None,
    engine: ContextEngine | None = None,
) -> TraceMetrics | None:
    """Replay one trace under one policy at one budget; None when it does not apply.

    ``on_turn`` gets each turn and the tiers that made a new decision in it (our policies);
    ``policy_object`` replaces the named preset's ``Policy`` (e.g. for another model),
    ``overrides`` changes some of its fields, and ``summarizer`` replaces the heuristic one.
    Every summary asked for is charged in ``cost`` as an LLM summarizer's request and answer,
    whichever summarizer ran (:class:`~openprogram.bench._charge.Charged`); summarizer time
    comes from the records and is kept apart from the render time.

    ``anchored`` replays as a live agent would: after each turn with recorded usage our engine
    learns the provider's count through ``anchor_usage``, so later renders budget with the
    correction, and the row reports the estimate's error against those counts. The provider
    counted what the agent really sent, not our render, so the engine is told that count
    with our estimate of what was sent: the mapping it learns (ratio and offset) holds for
    its own, compacted, renders too.

    Ids made during the replay (layers) are seeded by trace, policy and budget, so a run
    repeats its figures exactly (random ids in placeholders tokenize differently).

    ``engine`` (our policies) renders on the trace's own graph instead of a copy: a
    session's engine keeps the layers, records and receipts the replay made in its
    database (ids are then seeded by its session, unique in that database).
    """
    if policy == "native" and not trace.has_native:
        return None
    given = engine
    seed = f"replay:{trace.name}:{policy}:{budget}"
    with seeded_ids(seed if given is None else f"replay:{trace.graph.session}"):
        charged: Charged | None = None
        if given is not None:
            charged = Charged(given.summarizer, count.counter)
            given.summarizer = charged
        elif policy in _OURS:
            chosen = policy_object or Policy.named(_OURS[policy], **(overrides or {}))
            charged = Charged(summarizer or HeuristicSummarizer(), count.counter)
            # A copy per run: the layers one policy makes must not show in another's replay.
            # Its files go to ``state_dir`` (a database's folder, or a path the copies of
            # this replay share, which serves no database of its own) or to the copy's own
            # temporary folder.
            folder = StateFolder(state_dir, None) if isinstance(state_dir, Path) else state_dir
            engine = ContextEngine(
                trace.graph.clone(), chosen, charged, budget=budget, state_dir=folder
            )
        peer = (
            make_peer(policy, budget, count, count.counter.count_text) if policy in PEERS else None
        )
        calls = summary_tokens = 0  # our policies: what their summaries would cost (Charged)
        summary_ms = 0.0
        turns: list[Turn] = []
        usage: list[tuple[int, int]] = []
        history_tokens = 0
        counted = 0
        emergencies = 0
        for position, node in trace.turns:
            history = trace.messages[:position]
            while counted < position:
                history_tokens += count(trace.messages[counted])
                counted += 1
            started = time.perf_counter()
            fired: list[str] = []
            sources: list[MessageSource] = []
            if engine is not None:
                head = trace.graph.predecessor(node.id)
                engine.clock = _fixed_clock(node.at)
                rendered = engine.render(head=head.id if head else None)
                prompt, tokens = rendered.messages, rendered.tokens
                sources = rendered.sources
                fired = [record.tier for record in rendered.records]
                emergencies += "emergency" in fired
                ms = (time.perf_counter() - started) * 1000
                for record in rendered.records:
                    used = record.details.get("summarizer") if record.tier in _SUMMARIZING else None
                    if isinstance(used, dict):
                        summary_ms += float(used.get("ms", 0.0))
                        ms -= float(used.get("ms", 0.0))
            elif peer is not None:
                prompt = peer.render(history)
                ms = (time.perf_counter() - started) * 1000
                tokens = sum(count(m) for m in prompt)
                peer.answered(position, tokens, trace.messages[position])
            else:
                if policy == "none":
                    prompt = history
                elif policy == "masking":
                    prompt = observation_masking(history)
                elif policy == "trim":
                    prompt = trim_baseline(history, budget, count)
                elif policy == "native":
                    prompt = native_prompt(trace, node)
                else:
                    raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")
                ms = (time.perf_counter() - started) * 1000
                tokens = sum(count(m) for m in prompt)
            reported = reported_input(node.meta) if anchored else None
            if reported is not None:
                sent = sum(count(m) for m in _really_sent(trace, node, history))
                usage.append((sent, reported))
                if engine is not None and sent > 0:
                    engine.anchor_usage(reported, estimated=sent)
            assistant = trace.messages[position]
            turn = Turn(prompt, tokens, history_tokens, assistant, history, ms, sources)
            turns.append(turn)
            if on_turn is not None:
                on_turn(turn, fired)
        if peer is not None:
            peer.close()
        if given is not None and charged is not None:
            given.summarizer = charged.inner
        if charged is not None:
            calls = charged.calls
            summary_tokens = charged.tokens_in + charged.tokens_out
        return compute_metrics(
            turns,
            trace=trace.name,
            policy=policy,
            first_user_text=trace.first_user_text,
            budget=budget,
            count_message=count,
            summarizer_calls=calls,
            summarizer_tokens=summary_tokens,
            summarizer_cost=charged.cost if charged is not None else None,
            summarizer_ms=summary_ms,
            usage=usage if anchored else None,
            emergency_renders=emergencies if engine is not None else None,
        )


def _really_sent(trace: Trace, node: Node, history: list[ChatMessage]) -> list[ChatMessage]:
    """What the agent sent for this turn: since its own last compaction, else all history."""
    return native_prompt(trace, node) if trace.has_native else history


def _fixed_clock(at: datetime) -> Callable[[], datetime]:
    """A clock stopped at the traced turn's own time (for idle-triggered tiers)."""
    return lambda: at


def trace_files(paths: Iterable[Path]) -> list[Path]:
    """Trace files under the given files or folders, sorted (licenses and docs skipped)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                if child.is_file() and child.suffix in (".jsonl", ".json", ".traj"):
                    found.append(child)
        else:
            found.append(path)
    return found


def trace_names(inputs: Iterable[Path], files: Sequence[Path]) -> list[str]:
    """A name for each of ``files``: its path relative to the common root of ``inputs`` (a
    folder given, or the folder of a file given), so traces stored under one file name in
    nested folders (Claude Code sessions kept as ``<id>/full.jsonl``) stay apart in the rows."""
    roots = [p.absolute() if p.is_dir() else p.absolute().parent for p in inputs]
    roots += [f.absolute().parent for f in files]
    root = Path(os.path.commonpath(roots)) if roots else Path()
    return [f.absolute().relative_to(root).as_posix() for f in files]
