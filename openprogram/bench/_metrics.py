"""The figures ``openprogram bench`` reports for one trace under one policy.

Everything here is a pure function over OpenAI chat messages, so any policy — ours, a baseline, no
management at all — is judged by the same code. The definitions follow "How we measure" in the
mission; where they leave a choice open the docstring says which way we went.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import msgspec

from context import MessageSource, UsageAnchor, tool_pair_problems
from graph import ChatMessage
from openprogram._errors import BenchError

Message = ChatMessage
CountMessage = Callable[[Message], int]

#: How many characters of the first user message must survive for the task to count as kept
#: (and of the latest one, for the request).
TASK_CHARS = 80

_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_./:-]{5,}")
_CAMEL_RE = re.compile(r"[a-z][A-Z]")


class Turn(msgspec.Struct, frozen=True):
    """What one policy rendered before one real assistant turn of a trace.

    ``history`` is the full unmanaged history before the turn; callers pass the same growing list
    (or slices sharing its dicts) rather than copies, which is what lets reference recall scan only
    the new messages each turn.
    """

    prompt: list[Message]
    prompt_tokens: int
    history_tokens: int
    assistant: Message
    history: list[Message]
    ms: float
    sources: list[MessageSource] = msgspec.field(default_factory=list)
    """Where each prompt message came from (our policies; empty for baselines and peers)."""


class TraceMetrics(msgspec.Struct, frozen=True):
    """One row of the bench: one trace under one policy. Shares are fractions in 0–1; ``None``
    means the figure had no turns (or candidates) to stand on, which is not the same as 0.

    The ``usage_*`` figures exist only for an anchored run (``usage_turns`` is None otherwise):
    how far our token estimate of what the agent really sent was from the provider's input
    total, as mean absolute percentage errors before and after anchoring (see
    :func:`estimate_errors`), over ``usage_turns`` turns with recorded usage.
    """

    trace: str
    policy: str
    turns: int
    budget: int
    over_budget: int
    bad_pairs: int
    task_kept: float | None
    request_kept: float | None
    """Share of the pressured turns whose prompt holds the first ``TASK_CHARS`` characters of
    the latest user message before the turn (the request being worked on; the task is the
    first)."""
    ref_recall: float | None
    prefix_reuse: float | None
    util: float | None
    sent_tokens: int
    summarizer_calls: int
    summarizer_tokens: int
    ms_p50: float | None
    ms_p99: float | None
    summarizer_ms: float = 0.0
    cost: float = 0.0
    """Cache-weighted input cost in token units: reused prefix at 0.1, the rest at 1.25
    (Anthropic's cache read and write multipliers), plus every summary as an LLM summarizer's
    request (uncached, 1.0) and answer (at the output price, 5.0), whichever summarizer ran."""
    cost_vs_native: float | None = None
    """``cost`` over the agent's own (``native``) replay of the same trace and budget."""
    cost_vs_harness: float | None = None
    """``cost`` over the pydantic-ai-harness peer's (``harness``) on the same trace and budget."""
    emergency_share: float | None = None
    """Share of the renders the emergency tier acted on (our policies; None for the others)."""
    usage_turns: int | None = None
    usage_mape: float | None = None
    usage_mape_anchored: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The row as a plain dict, keys in field order (the JSONL and table order); the
        ``usage_*`` keys only for an anchored run."""
        names = self.__struct_fields__
        if self.usage_turns is None:
            names = tuple(name for name in names if not name.startswith("usage_"))
        return {name: getattr(self, name) for name in names}


def content_text(content: Any) -> str:
    """The text of a message content: a str, None, or a list of parts (only text parts count)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        return "\n".join(texts)
    return str(content)


def _leaves(value: Any) -> Iterator[tuple[bool, str]]:
    """The keys (``True``) and scalar values (``False``) of decoded JSON, as text."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield True, str(key)
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    elif value is not None:
        yield False, str(value)


def _decoded(arguments: Any) -> Any:
    """A call's arguments decoded when they are JSON text; other text stays as it is."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def arguments_text(arguments: Any) -> str:
    """A tool call's arguments as the text the agent wrote: decoded, so an escaped tab or
    newline (``\\tname``) does not read as part of an identifier (``tname``)."""
    return "\n".join(text for _, text in _leaves(_decoded(arguments)))


def argument_parts(arguments: Any) -> tuple[list[str], list[str]]:
    """A tool call's argument names (``old_string``) and values, as :func:`arguments_text`
    reads them; text that is not JSON is one value."""
    names: list[str] = []
    values: list[str] = []
    for is_name, text in _leaves(_decoded(arguments)):
        (names if is_name else values).append(text)
    return names, values


def message_text(message: Message) -> str:
    """Searchable text of a message: its content plus each tool call's name and arguments,
    because an agent often names a file only inside a call's arguments."""
    pieces = [content_text(message.get("content"))]
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        pieces.append(str(function.get("name") or ""))
        arguments = function.get("arguments")
        if arguments is not None:
            pieces.append(arguments_text(arguments))
    return "\n".join(p for p in pieces if p)


def messages_text(messages: Iterable[Message]) -> str:
    """Text of many messages, one block each, built once so lookups are substring tests."""
    return "\n".join(message_text(m) for m in messages)


def identifiers(text: str) -> set[str]:
    """Identifier-like tokens of ``text``: paths, snake_case, camelCase and dotted names.

    Plain words (even long ones) are left out: the point is to track references an agent must
    reproduce exactly, where losing the context means guessing.
    """
    found: set[str] = set()
    for match in _IDENT_RE.finditer(text):
        ident = match.group().rstrip(".:-/")
        if len(ident) < 6 or ident in found:
            continue
        if (
            "_" in ident
            or "/" in ident
            or "." in ident[1:-1]
            or _CAMEL_RE.search(ident) is not None
        ):
            found.add(ident)
    return found


CACHE_READ = 0.1
CACHE_WRITE = 1.25


def cache_cost(sent: int, reused: int) -> float:
    """What sending ``sent`` tokens costs when ``reused`` of them hit the prompt cache, in
    units of one uncached input token: ``sent × (reuse × 0.1 + (1 − reuse) × 1.25)``.

    >>> cache_cost(1000, 900)
    215.0
    """
    return reused * CACHE_READ + (sent - reused) * CACHE_WRITE


def with_native_ratio(rows: Sequence[TraceMetrics]) -> list[TraceMetrics]:
    """Rows with ``cost_vs_native`` filled where the same trace and budget has a native row."""
    return _with_ratio(rows, "native", "cost_vs_native")


def with_cost_ratios(rows: Sequence[TraceMetrics]) -> list[TraceMetrics]:
    """Rows with ``cost_vs_native`` and ``cost_vs_harness`` filled where the same trace and
    budget has a row of that policy."""
    return _with_ratio(with_native_ratio(rows), "harness", "cost_vs_harness")


def _with_ratio(rows: Sequence[TraceMetrics], policy: str, field: str) -> list[TraceMetrics]:
    base = {(r.trace, r.budget): r.cost for r in rows if r.policy == policy and r.cost}
    return [
        msgspec.structs.replace(r, **{field: round(r.cost / base[(r.trace, r.budget)], 4)})
        if (r.trace, r.budget) in base
        else r
        for r in rows
    ]


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile: a value that actually occurred (p99 of < 100 turns is the max)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def reported_input(meta: Mapping[str, object]) -> int | None:
    """The provider's input token total for the call that produced a message, from its meta:
    ``usage`` as the importers store it (input plus cache reads and writes, which Anthropic
    bills apart), or an OpenAI-style ``prompt_tokens``. None when there is no usable count."""
    usage = meta.get("usage")
    if not isinstance(usage, dict):
        return None
    if "input" in usage:
        parts = [usage.get(key, 0) for key in ("input", "cache_read", "cache_creation")]
    else:
        parts = [usage.get("prompt_tokens")]
    if not all(isinstance(part, int) and not isinstance(part, bool) for part in parts):
        return None
    total = sum(parts)
    return total if total > 0 else None


def estimate_errors(pairs: Iterable[tuple[int, int]]) -> tuple[float | None, float | None]:
    """Mean absolute percentage error of token estimates against reported input totals, raw
    and anchored.

    ``pairs`` are (our estimate, provider's total) per turn in order. The anchored estimate of a
    turn is the raw one scaled by a :class:`UsageAnchor` fed with every earlier pair, which is
    what a live agent calling ``ContextEngine.anchor_usage`` after each response would have.

    >>> estimate_errors([(100, 120), (200, 240)])
    (0.16666666666666666, 0.08333333333333333)
    """
    anchor = UsageAnchor()
    raw = anchored = 0.0
    n = 0
    for estimated, reported in pairs:
        if reported <= 0:
            continue
        raw += abs(estimated - reported) / reported
        anchored += abs(anchor.adjust(estimated) - reported) / reported
        anchor.anchor_usage(estimated, reported)
        n += 1
    return (raw / n, anchored / n) if n else (None, None)


class _HistoryIdentifiers:
    """Identifiers seen in a growing history, rescanning only the messages added since last time.

    The history before turn t+1 extends the one before turn t; when a history is not such an
    extension (shorter, or its old last message differs) we fall back to a full scan.
    """

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self._length = 0
        self._last: Message | None = None

    def update(self, history: Sequence[Message]) -> set[str]:
        extends = len(history) >= self._length and (
            self._length == 0
            or history[self._length - 1] is self._last
            or history[self._length - 1] == self._last
        )
        start = self._length if extends else 0
        if not extends:
            self.seen = set()
        for message in history[start:]:
            self.seen |= identifiers(message_text(message))
        self._length = len(history)
        self._last = history[-1] if history else None
        return self.seen


def latest_request(history: Sequence[Message]) -> str:
    """The text of the last user message with text in ``history`` ("" when none): what the
    person asked for most recently. Tool results are ``tool`` messages, never counted.

    >>> latest_request([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
    ...                 {"role": "user", "content": "c"}, {"role": "tool", "content": "d"}])
    'c'
    """
    for message in reversed(history):
        if message.get("role") == "user":
            text = content_text(message.get("content"))
            if text.strip():
                return text
    return ""


def _leading_equal(previous: Sequence[Message], current: Sequence[Message]) -> int:
    """Number of leading messages of ``current`` equal to those of ``previous``."""
    n = 0
    for old, new in zip(previous, current, strict=False):
        if old is not new and old != new:
            break
        n += 1
    return n


def compute_metrics(
    turns: Sequence[Turn],
    *,
    trace: str,
    policy: str,
    first_user_text: str,
    budget: int,
    count_message: CountMessage,
    summarizer_calls: int = 0,
    summarizer_tokens: int = 0,
    summarizer_cost: float | None = None,
    summarizer_ms: float = 0.0,
    usage: Sequence[tuple[int, int]] | None = None,
    emergency_renders: int | None = None,
) -> TraceMetrics:
    """Measure one trace under one policy from the prompts the policy rendered turn by turn.

    ``count_message`` counts one message's tokens for prefix reuse; counts are memoised per
    message object here, so an uncached counter is called once per distinct dict. ``usage``
    (an anchored run) holds, per turn with recorded usage, the estimate of what the agent
    really sent and the provider's input total. ``summarizer_cost`` is what the summaries
    cost in uncached input tokens (default: ``summarizer_tokens``, all at the input price);
    ``emergency_renders`` how many turns the emergency tier acted on (our policies).
    """
    if budget <= 0:
        raise BenchError(f"budget must be positive, got {budget}")
    needle = first_user_text[:TASK_CHARS]
    counts: dict[int, int] = {}

    def count(message: Message) -> int:
        key = id(message)
        if key not in counts:
            counts[key] = count_message(message)
        return counts[key]

    history_ids = _HistoryIdentifiers()
    over = bad = 0
    kept = pressed = 0
    requested = asked = 0
    utils: list[float] = []
    ref_present = ref_candidates = 0
    reused = sent = 0
    previous: Sequence[Message] = ()
    for turn in turns:
        sent += turn.prompt_tokens
        if turn.prompt_tokens > budget:
            over += 1
        if tool_pair_problems(turn.prompt):
            bad += 1
        prompt_text = messages_text(turn.prompt)
        if turn.history_tokens > budget:
            pressed += 1
            kept += needle in prompt_text
            request = latest_request(turn.history)[:TASK_CHARS]
            if request:
                asked += 1
                requested += request in prompt_text
            utils.append(turn.prompt_tokens / budget)
        seen = history_ids.update(turn.history)
        candidates = identifiers(message_text(turn.assistant)) & seen
        ref_candidates += len(candidates)
        ref_present += sum(ident in prompt_text for ident in candidates)
        same = _leading_equal(previous, turn.prompt)
        reused += sum(count(m) for m in turn.prompt[:same])
        previous = turn.prompt

    times = [turn.ms for turn in turns]
    mape, mape_anchored = estimate_errors(usage or ())
    return TraceMetrics(
        trace=trace,
        policy=policy,
        turns=len(turns),
        budget=budget,
        over_budget=over,
        bad_pairs=bad,
        task_kept=kept / pressed if pressed else None,
        request_kept=requested / asked if asked else None,
        ref_recall=ref_present / ref_candidates if ref_candidates else None,
        prefix_reuse=reused / sent if sent else None,
        util=sum(utils) / len(utils) if utils else None,
        sent_tokens=sent,
        summarizer_calls=summarizer_calls,
        summarizer_tokens=summarizer_tokens,
        summarizer_ms=round(summarizer_ms, 3),
        cost=round(
            cache_cost(sent, reused)
            + (summarizer_tokens if summarizer_cost is None else summarizer_cost),
            1,
        ),
        ms_p50=percentile(times, 50),
        ms_p99=percentile(times, 99),
        emergency_share=(
            None if emergency_renders is None or not turns else emergency_renders / len(turns)
        ),
        usage_turns=None if usage is None else len(usage),
        usage_mape=mape,
        usage_mape_anchored=mape_anchored,
    )
