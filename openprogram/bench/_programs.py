"""Seeded nested agent programs for the bench: the runtime path, replayed through ``Session``.

A program is a few user requests, each followed by a long autonomous stretch (30 to 60
model turns) of nested ``@openprogram.function`` calls: some run concurrently, each makes
``llm()`` calls whose turns ask for tools, often several at once, with outputs from 10 to
200,000 characters, and now and then for a history tool on an id the prompt shows. A
scripted model drives it; everything follows from the seed, so a row repeats exactly.

:func:`generate_program` makes one from a seed and :func:`run_program` runs it, returning
each request as sent (:class:`Sent`); ``_program_rows`` turns those into bench rows.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import openprogram
from context import Policy
from graph import TOP, ChatMessage, Dialogue, ToolSchema, text_of
from openprogram._runtime._current import current_frame
from openprogram._runtime._models import ModelResponse
from openprogram._runtime._session import Session, current_session
from openprogram.testing import FunctionModel, ModelRequest, tool_call

__all__ = [
    "SYSTEM",
    "Loop",
    "Program",
    "ProgramRequest",
    "Recorder",
    "Sent",
    "Task",
    "ToolUse",
    "generate_program",
    "run_program",
]

SYSTEM = "You are an autonomous engineering agent. Work through each task with the tools."
MIN_OUTPUT, MAX_OUTPUT = 10, 200_000
"""Characters a tool output has, drawn log-uniformly between these."""
HUGE_REQUEST = (12_000, 40_000)
"""Characters of a pasted-in request (one in six), which the engine shows as head and tail."""


@dataclass(frozen=True)
class ToolUse:
    """One tool call of a round: ``fetch`` of ``size`` characters, or a history tool on an
    id the prompt shows (``fetch`` of ``size`` when it shows none)."""

    kind: str
    size: int


@dataclass(frozen=True)
class Loop:
    """One ``llm()`` call: its rounds of (parallel) tool calls, then its answer."""

    key: str
    rounds: tuple[tuple[ToolUse, ...], ...]

    @property
    def prompt(self) -> str:
        return (
            f"Step {self.key}: work through {len(self.rounds)} round(s) of tool calls, then report."
        )


@dataclass(frozen=True)
class Task:
    """A function call: its parts in order, each an ``llm()`` loop or sub-tasks run
    concurrently."""

    key: str
    parts: tuple[Loop | tuple[Task, ...], ...]

    def walk(self) -> list[Task]:
        found = [self]
        for part in self.parts:
            if isinstance(part, tuple):
                for child in part:
                    found += child.walk()
        return found


@dataclass(frozen=True)
class ProgramRequest:
    """What the user asks, and the task the program runs for it."""

    text: str
    task: Task


@dataclass(frozen=True)
class Program:
    seed: int
    requests: tuple[ProgramRequest, ...]

    @property
    def name(self) -> str:
        return f"program-{self.seed}"

    @property
    def turns(self) -> int:
        """Model turns the program takes (each loop's rounds and its answer)."""
        return sum(
            len(part.rounds) + 1
            for request in self.requests
            for task in request.task.walk()
            for part in task.parts
            if isinstance(part, Loop)
        )


_WORDS = (
    *("parser", "cache", "router", "session", "queue", "index", "export", "billing"),
    *("worker", "schema", "ledger", "tokenizer", "scheduler", "gateway", "mirror", "shard"),
)


def _request_text(rng: random.Random, number: int) -> str:
    words = rng.sample(_WORDS, 3)
    path = f"src/{words[0]}/{words[1]}_{rng.randint(1, 99)}.py"
    text = (
        f"Request {number}: the {words[0]} {words[1]} fails on {path} when {words[2]} "
        f"runs; find why, fix {words[1]}_handler and report what changed "
        f"(ticket OPS-{rng.randint(1000, 9999)})."
    )
    if rng.random() < 1 / 6:
        lines = [
            f"{i:05d} {rng.choice(_WORDS)}_{rng.randint(0, 999)} status={rng.choice((200, 500))}"
            for i in range(rng.randint(*HUGE_REQUEST) // 40)
        ]
        text += " The log I got:\n" + "\n".join(lines)
    return text


def _uses(rng: random.Random) -> tuple[ToolUse, ...]:
    parallel = rng.choice((1, 1, 1, 2, 3))
    log_min, log_max = math.log10(MIN_OUTPUT), math.log10(MAX_OUTPUT)
    return tuple(
        ToolUse(
            "history" if rng.random() < 0.1 else "fetch",
            int(10 ** rng.uniform(log_min, log_max)),
        )
        for _ in range(parallel)
    )


def _task(rng: random.Random, key: str, turns: int, depth: int) -> Task:
    parts: list[Loop | tuple[Task, ...]] = []
    left = turns
    while left > 0:
        if depth > 0 and left >= 6 and rng.random() < 0.4:
            fanout = rng.randint(1, 3)
            share = max(2, min(left // fanout, rng.randint(4, 14)))
            children = tuple(
                _task(rng, f"{key}.{len(parts)}.{i}", share, depth - 1) for i in range(fanout)
            )
            parts.append(children)
            left -= share * fanout
            continue
        rounds = min(max(1, left - 1), rng.randint(1, 8))
        loop = Loop(f"{key}.{len(parts)}", tuple(_uses(rng) for _ in range(rounds)))
        parts.append(loop)
        left -= rounds + 1
    return Task(key, tuple(parts))


def generate_program(seed: int) -> Program:
    """A program from ``seed``: 2 to 4 requests, each with a task of depth up to 3 and
    30 to 60 model turns."""
    rng = random.Random(seed)
    requests = []
    for number in range(1, rng.randint(2, 4) + 1):
        text = _request_text(rng, number)
        task = _task(rng, f"r{number}", rng.randint(30, 60), rng.randint(1, 3))
        requests.append(ProgramRequest(text, task))
    return Program(seed, tuple(requests))


# -- the tools and the functions it runs ------------------------------------------------------


def fetch(key: str, size: int) -> str:
    """Fetch the record ``key``: ``size`` characters of it."""
    rng = random.Random(key)
    lines: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        line = (
            f"{key}:{len(lines)} {word}_{rng.randint(0, 9999)} in src/{word}/"
            f"{rng.choice(_WORDS)}.py took {rng.randint(1, 900)} ms"
        )
        lines.append(line)
        length += len(line) + 1
    return "\n".join(lines)[:size]


_TASKS: contextvars.ContextVar[dict[str, Task]] = contextvars.ContextVar("bench_program_tasks")
_LOOP: contextvars.ContextVar[Loop | None] = contextvars.ContextVar("bench_loop", default=None)


@openprogram.function
async def work(key: str) -> str:
    """Carry out one task of a generated program."""
    task = _TASKS.get()[key]
    notes: list[str] = []
    for part in task.parts:
        if isinstance(part, Loop):
            _LOOP.set(part)
            notes.append(await openprogram.allm(part.prompt, tools=[fetch]))
        else:
            notes += await asyncio.gather(*(work(child.key) for child in part))
    return f"{key} done: " + "; ".join(note[:60] for note in notes)


_READ_BACK = re.compile(
    r'(read_output|expand_function|expand_layer)\("([0-9A-Z]{26}|n[0-9]+|fn_[0-9]+|L[0-9]+)"'
)


def _reply(turns: dict[str, int], request: ModelRequest) -> Any:
    loop = _LOOP.get()
    if loop is None:
        return "Nothing to do."
    turn = turns[loop.key] = turns.get(loop.key, 0) + 1
    if turn > len(loop.rounds):
        return f"Step {loop.key} finished after {len(loop.rounds)} round(s)."
    calls = []
    for index, use in enumerate(loop.rounds[turn - 1]):
        key = f"{loop.key}.{turn}.{index}"
        if use.kind == "history" and "read_output" in request.tool_names:
            found = _READ_BACK.findall(" ".join(_texts(request.messages)))
            if found:
                name, node_id = found[len(found) // 2]
                calls.append(tool_call(name, {"id": node_id}))
                continue
        calls.append(tool_call("fetch", {"key": key, "size": use.size}))
    return {"content": f"Round {turn} of step {loop.key}.", "tool_calls": calls}


def _texts(messages: Sequence[ChatMessage]) -> list[str]:
    return [text_of(m.get("content")) for m in messages]


def program_model() -> FunctionModel:
    """The scripted model of the generated programs (each loop's turns, in order)."""
    turns: dict[str, int] = {}
    return FunctionModel(lambda request: _reply(turns, request), name="scripted-program")


# -- running and recording ------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    """One request as sent: its frame, messages and tokens (our count, tool schemas in),
    the floor, the budget, the render's time, and the user's latest request then."""

    frame: str | None
    messages: list[ChatMessage]
    tokens: int
    floor: int
    budget: int
    ms: float
    request: str
    first: str


class Recorder:
    """A model that records every request it is sent (what the engine rendered for it)
    and asks ``inner`` for the answer."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name: str = str(inner.name)
        self.provider: str = str(getattr(inner, "provider", "openprogram.bench"))
        self.sent: list[Sent] = []

    def _note(self, messages: Sequence[ChatMessage]) -> None:
        session = current_session()
        engine = session.engine
        last = engine.last
        if last is None:
            return
        first, latest = user_requests(session)
        self.sent.append(
            Sent(
                current_frame().function,
                [m.copy() for m in messages],
                last.tokens,
                last.floor,
                last.budget,
                engine.render_ms,
                latest,
                first,
            )
        )

    def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSchema] = (), **kw: Any
    ) -> ModelResponse:
        self._note(messages)
        response: ModelResponse = self.inner.complete(messages, tools, **kw)
        return response

    async def acomplete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSchema] = (), **kw: Any
    ) -> ModelResponse:
        self._note(messages)
        response: ModelResponse = await self.inner.acomplete(messages, tools, **kw)
        return response


def user_requests(session: Session) -> tuple[str, str]:
    """The first and the latest user message of the top level (what the person asked)."""
    graph = session.graph
    node_id = graph.head_of(TOP)
    texts: list[str] = []
    while node_id is not None:
        node = graph.get(node_id)
        payload = node.payload
        if isinstance(payload, Dialogue) and payload.role == "user":
            texts.append(text_of(payload.content))
        before = graph.predecessor(node_id)
        node_id = None if before is None else before.id
    return (texts[-1], texts[0]) if texts else ("", "")


def run_program(
    program: Program,
    policy: Policy,
    budget: int,
    *,
    db: str = ":memory:",
    state_dir: str | None = None,
) -> list[Sent]:
    """Run ``program`` in a new session under ``policy`` and ``budget``; every request sent."""
    recorder = Recorder(program_model())
    tasks = {task.key: task for request in program.requests for task in request.task.walk()}
    session = Session(
        db, model=recorder, system=SYSTEM, policy=policy, budget=budget, state_dir=state_dir
    )
    token = _TASKS.set(tasks)
    try:
        with session:
            for request in program.requests:
                session.graph.append({"role": "user", "content": request.text})
                session.run(work, request.task.key)
    finally:
        _TASKS.reset(token)
    return recorder.sent
