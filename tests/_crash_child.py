"""A child process for the concurrency and crash tests: it loops over one operation and
prints an acknowledgement (flushed) each time one has returned, so whatever it printed
before it was killed must be in the store.

    python tests/_crash_child.py MODE URL SESSION STATE_DIR SEED [COUNT [fresh]]

MODE is ``write`` (COUNT appends once a ``go`` line comes in, then ``done``; ``fresh``: the
store is opened only then, so writers race to create it; for the concurrency tests), ``append``,
``batch``, ``render``, ``layers`` or ``records`` (until killed). Lines printed:
``ready`` once the store is open, then ``node <id>``, ``layer <id>`` or ``record <id>``.
A loop never outlives its parent by long: it stops after ``LIFETIME`` seconds.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

LIFETIME = 60.0
BIG = 3_000
"""Characters of a long tool output (over the offload threshold the tests use)."""


def ack(kind: str, value: str) -> None:
    sys.stdout.write(f"{kind} {value}\n")
    sys.stdout.flush()


def call(call_id: str, name: str = "bash") -> dict[str, Any]:
    arguments = '{"cmd": "ls"}'
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def output(rng: random.Random, size: int) -> str:
    words = ["alpha", "beta", "gamma", "delta", "error", "ok", "line", "value"]
    return "\n".join(" ".join(rng.choices(words, k=8)) for _ in range(size // 40))


def round_of(graph: Any, rng: random.Random, tag: str, big: bool = False) -> list[str]:
    """A user turn, an assistant tool call, its result and the assistant's answer."""
    size = BIG if big else rng.randrange(20, 400)
    return [
        graph.append({"role": "user", "content": f"{tag}: please look"}).id,
        graph.append({"role": "assistant", "content": None, "tool_calls": [call(f"{tag}-c")]}).id,
        graph.append({"role": "tool", "tool_call_id": f"{tag}-c", "content": output(rng, size)}).id,
        graph.append({"role": "assistant", "content": f"{tag}: done"}).id,
    ]


def write(graph: Any, writer: str, count: int) -> None:
    """``count`` appends in rounds of user, tool call and result (the concurrency test)."""
    for index in range(count):
        tag = f"{writer}-{index // 3}"
        if index % 3 == 0:
            node = graph.append({"role": "user", "content": f"{tag} asks"})
        elif index % 3 == 1:
            node = graph.append({"role": "assistant", "content": None, "tool_calls": [call(tag)]})
        else:
            node = graph.append({"role": "tool", "tool_call_id": tag, "content": f"{tag} ok"})
        ack("node", node.id)
    ack("done", writer)


def looping(step: Callable[[int], None]) -> None:
    started = time.monotonic()
    index = 0
    while time.monotonic() - started < LIFETIME:
        step(index)
        index += 1


def main(argv: list[str]) -> None:
    mode, url, session, state_dir, seed = argv[:5]
    rng = random.Random(int(seed))
    from graph import ConversationGraph

    if mode == "write":  # all writers start on "go"; "fresh": before the store is opened
        fresh = argv[6:] == ["fresh"]
        if fresh:
            ack("ready", "0")
            sys.stdin.readline()
        graph = ConversationGraph.open(url, session=session)
        if not fresh:
            ack("ready", str(graph.last_seq))
            sys.stdin.readline()
        write(graph, f"w{seed}", int(argv[5]))
        return
    graph = ConversationGraph.open(url, session=session)
    from context import CompactionRecord, ContextEngine, ContextError, ContextStorage, Policy

    policy = Policy(
        offload_chars=1_500,
        offload_share=None,
        collapse_min_rounds=1,
        collapse_keep_recent=2,
    )
    engine = ContextEngine(graph, policy, budget=2_500, state_dir=Path(state_dir))
    storage = ContextStorage(graph.store, session, Path(state_dir))
    run = f"{seed}-{time.time_ns()}"
    ack("ready", str(graph.last_seq))

    def append(index: int) -> None:
        for node in round_of(graph, rng, f"a{run}-{index}"):
            ack("node", node)

    def batch(index: int) -> None:
        with graph.batch():
            done = round_of(graph, rng, f"b{run}-{index}")
            done += round_of(graph, rng, f"b{run}-{index}x")
        for node in done:
            ack("node", node)

    def render(index: int) -> None:
        for node in round_of(graph, rng, f"r{run}-{index}", big=rng.random() < 0.6):
            ack("node", node)
        rendered = engine.render()
        ack("render", f"{rendered.tokens}/{rendered.budget}")

    def layers(index: int) -> None:
        done = round_of(graph, rng, f"l{run}-{index}") + round_of(graph, rng, f"l{run}-{index}x")
        for node in done:
            ack("node", node)
        what = index % 3
        try:
            if what == 0:
                ack("layer", engine.collapse(done[0], done[-1]).id)
            elif what == 1:
                ack("layer", engine.compact().id)
            else:
                for record in engine.render().records:
                    if "layer" in record.details:
                        ack("layer", str(record.details["layer"]))
        except ContextError as error:  # e.g. nothing old enough to compact yet
            ack("refused", str(error).replace("\n", " "))

    def records(index: int) -> None:
        record = CompactionRecord(
            id=f"rec-{run}-{index}",
            session=session,
            timestamp="2026-01-01T00:00:00+00:00",
            tier="test",
            tokens_before=10,
            tokens_after=5,
            messages_before=2,
            messages_after=1,
            summary=output(rng, rng.choice([200, 20_000, 400_000])),
        )
        problems = storage.save_records([record], graph.last_seq)
        if problems:
            raise SystemExit(f"records not saved: {problems}")
        ack("record", record.id)

    steps: dict[str, Callable[[int], None]] = {
        "append": append,
        "batch": batch,
        "render": render,
        "layers": layers,
        "records": records,
    }
    looping(steps[mode])


if __name__ == "__main__":
    main(sys.argv[1:])
