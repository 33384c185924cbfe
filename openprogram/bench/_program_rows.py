"""Bench rows of the runtime path: the demo and the generated programs, run through
``Session``, measured by the code that measures the traces (:func:`compute_metrics`).

A generated program has no real next turn, so its row has no reference recall; every
request it sent counts (not only the pressured ones), and request kept is verbatim: the
whole latest user request, or for one the engine shows as head and tail, both with the
place to read the rest.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import cast

import msgspec

from context import Policy
from graph import ChatMessage
from openprogram.bench._metrics import TraceMetrics, Turn, compute_metrics, content_text
from openprogram.bench._programs import Recorder, Sent, generate_program, run_program
from openprogram.bench._replay import MessageCounter

__all__ = ["demo_row", "program_row", "request_shown", "rows_of"]

HEAD_CHARS, TAIL_CHARS = 200, 100
"""What a request shown cut must keep at least, besides where to read the rest (the
engine keeps a quarter of the budget, 1,200 and 800 characters from 8,000 tokens up)."""


def request_shown(messages: Sequence[Mapping[str, object]], request: str) -> bool:
    """Whether a prompt holds ``request`` verbatim: whole in a user message, or (a request
    the engine cut) its head and tail around a marker that says where to read the rest."""
    if not request:
        return True
    texts = [content_text(m.get("content")) for m in messages if m.get("role") == "user"]
    if any(request in text for text in texts):
        return True
    if len(request) <= HEAD_CHARS + TAIL_CHARS:
        return False
    head, tail = request[:HEAD_CHARS], request[-TAIL_CHARS:]
    return any(
        head in text and tail in text and "read_output(" in text[text.index(head) :]
        for text in texts
    )


def rows_of(
    sent: Sequence[Sent], *, trace: str, policy: str, budget: int, count: MessageCounter
) -> TraceMetrics:
    """One bench row from the requests a run sent. Prefix reuse follows each frame's own
    requests in order (a provider caches each prefix), frames in the order they first sent."""
    frames: dict[str | None, list[Sent]] = {}
    for one in sent:
        frames.setdefault(one.frame, []).append(one)
    ordered = [one for group in frames.values() for one in group]
    turns = [
        Turn(
            one.messages,
            one.tokens,
            budget + 1,  # every request counts, pressured or not
            cast("ChatMessage", {}),  # a program's turn has no assistant message to compare
            [{"role": "user", "content": one.first}, {"role": "user", "content": one.request}],
            one.ms,
        )
        for one in ordered
    ]
    first = sent[0].first if sent else ""
    row = compute_metrics(
        turns, trace=trace, policy=policy, first_user_text=first, budget=budget, count_message=count
    )
    kept = sum(request_shown(one.messages, one.request) for one in sent)
    over = sum(one.tokens > one.budget and one.floor <= one.budget for one in sent)
    return msgspec.structs.replace(
        row, over_budget=over, request_kept=kept / len(sent) if sent else None
    )


def program_row(seed: int, policy: str, budget: int, count: MessageCounter) -> TraceMetrics:
    """The row of generated program ``seed`` under preset ``policy`` at ``budget``."""
    program = generate_program(seed)
    with tempfile.TemporaryDirectory(prefix="openprogram-bench-") as folder:
        sent = run_program(
            program, Policy.named(policy), budget, state_dir=os.path.join(folder, "state")
        )
    return rows_of(sent, trace=program.name, policy=policy, budget=budget, count=count)


def demo_row(budget: int, count: MessageCounter) -> TraceMetrics:
    """The row of ``openprogram demo`` at ``budget`` (its own policy, in a fresh database)."""
    from openprogram._demo import run_demo
    from openprogram.examples.research import scripted_model
    from openprogram.testing import override

    recorder = Recorder(scripted_model())
    with tempfile.TemporaryDirectory(prefix="openprogram-bench-") as folder:
        with override(model=recorder):
            run = run_demo(
                os.path.join(folder, "demo.db"), budget, state_dir=os.path.join(folder, "state")
            )
        run.session.close()
    return rows_of(recorder.sent, trace="demo", policy="demo", budget=budget, count=count)
