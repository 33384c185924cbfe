"""One step of ``openprogram bench --scale``, run in a process of its own.

``python -m openprogram.bench._scale_steps STEP '{"url": …}'`` prints one JSON object: the
step's figures, wall times from ``time.perf_counter`` and the process's peak and current
resident memory (``VmHWM``/``VmRSS``), so each step's peak is its own. Only the public API
is used (a graph, a batch, an engine), so a step measures what a user's code would see.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # types only: a step's process measures its own memory
    from graph import ChatMessage, FunctionCall

BUDGET = 32_000
FAST_ROUNDS = 5
"""Renders after one more append: the median of this many."""
REFRESHES = 200
CHUNK = 10_000
"""Messages made at a time for the append step."""


def memory_mb() -> dict[str, float]:
    """Peak and current resident set size of this process, in MB."""
    found: dict[str, float] = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmHWM", "VmRSS"):
                found[name] = int(value.split()[0]) / 1024
    except OSError:
        pass
    if "VmHWM" not in found:  # not Linux: ru_maxrss is KB on Linux, bytes on macOS
        import resource  # POSIX only: importing openprogram.bench must not need it

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        found["VmHWM"] = peak / (1024 * 1024 if sys.platform == "darwin" else 1024)
    return {"peak_mb": round(found["VmHWM"], 1), "rss_mb": round(found.get("VmRSS", 0.0), 1)}


def iter_messages(nodes: int) -> Iterator[ChatMessage]:
    """An agent's session of ``nodes`` nodes: a user turn, an assistant calling a tool, its
    output (three nodes a round; outputs of 300 to 3,000 characters, as a coding agent's)."""
    count = turn = 0
    while count < nodes:
        turn += 1
        yield {"role": "user", "content": f"step {turn}: run the tests"}
        count += 1
        if count >= nodes:
            break
        size = 3_000 if turn % 9 == 3 else 300 + (turn * 37) % 900
        output = "".join(
            f"{turn}:{line} src/app/module_{line % 7}.py ok\n" for line in range(size // 28)
        )
        call: FunctionCall = {
            "name": "bash",
            "arguments": json.dumps({"cmd": f"pytest -q tests/t{turn}.py"}),
        }
        yield {
            "role": "assistant",
            "content": f"Step {turn}: running the tests.",
            "tool_calls": [{"id": f"c{turn}", "type": "function", "function": call}],
        }
        yield {"role": "tool", "tool_call_id": f"c{turn}", "content": output}
        count += 2


def messages(nodes: int) -> list[ChatMessage]:
    """:func:`iter_messages` as a list."""
    return list(iter_messages(nodes))


def step_append(url: str, session: str, nodes: int) -> dict[str, Any]:
    """All the messages appended in one ``batch()``. They are made a chunk at a time, as an
    importer reads a trace, and only the appends (and the batch's commit) are timed, so
    neither the time nor the peak memory is the bench's own input."""
    from graph import ConversationGraph

    g = ConversationGraph.open(url, session=session)
    if len(g):
        raise SystemExit(f"session {session!r} is not empty")
    source = iter_messages(nodes)
    seconds = 0.0
    with g.batch():
        while chunk := list(islice(source, CHUNK)):
            started = time.perf_counter()
            for message in chunk:
                g.append(message)
            seconds += time.perf_counter() - started
        ending = time.perf_counter()
    seconds += time.perf_counter() - ending
    g.close()
    return {"seconds": seconds, "nodes": len(g), "nodes_per_s": len(g) / seconds, **memory_mb()}


def step_reopen(url: str, session: str) -> dict[str, Any]:
    from graph import ConversationGraph

    started = time.perf_counter()
    g = ConversationGraph.open(url, session=session)
    seconds = time.perf_counter() - started
    opened = memory_mb()
    times = []
    for _ in range(REFRESHES):
        began = time.perf_counter()
        g.refresh()
        times.append(time.perf_counter() - began)
    return {
        "seconds": seconds,
        "nodes": len(g),
        "refresh_ms": statistics.median(times) * 1000,
        **opened,
    }


RAW_SCHEMA = (
    "CREATE TABLE nodes (id TEXT PRIMARY KEY, session TEXT NOT NULL, seq INTEGER NOT NULL, "
    "kind TEXT NOT NULL, at_us INTEGER NOT NULL, payload TEXT NOT NULL, meta TEXT NOT NULL)",
    "CREATE INDEX nodes_by_seq ON nodes (session, seq)",
    "CREATE TABLE edges (src TEXT, dst TEXT, type TEXT, session TEXT NOT NULL, "
    "PRIMARY KEY (src, dst, type))",
)


def step_raw(path: str, nodes: int) -> dict[str, Any]:
    """The same rows with plain ``sqlite3`` and ``msgspec``: one node row and one chain edge
    per message, inserted in one transaction, then read back in order and decoded — the
    floor a store on this machine cannot go under, measured in the same run."""
    import sqlite3

    import msgspec

    todo = messages(nodes)
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    for statement in RAW_SCHEMA:
        connection.execute(statement)
    encode = msgspec.json.encode
    started = time.perf_counter()
    cpu = time.process_time()
    rows = [
        (f"n{i:012d}", "raw", i, "dialogue", 1_700_000_000_000_000 + i, encode(m).decode(), "{}")
        for i, m in enumerate(todo, 1)
    ]
    edges = [(f"n{i:012d}", f"n{i - 1:012d}", "next", "raw") for i in range(2, len(todo) + 1)]
    connection.execute("BEGIN")
    connection.executemany("INSERT INTO nodes VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    connection.executemany("INSERT INTO edges VALUES (?, ?, ?, ?)", edges)
    connection.execute("COMMIT")
    append_seconds = time.perf_counter() - started
    append_cpu = time.process_time() - cpu
    connection.close()
    del rows, edges, todo
    started = time.perf_counter()
    cpu = time.process_time()
    reader = sqlite3.connect(path)
    decode = msgspec.json.decode
    found = [
        (row[0], row[1], decode(row[2]), decode(row[3]))
        for row in reader.execute(
            "SELECT id, seq, payload, meta FROM nodes WHERE session = ? ORDER BY seq", ("raw",)
        )
    ]
    links = reader.execute("SELECT src, dst FROM edges WHERE session = ?", ("raw",)).fetchall()
    read_seconds = time.perf_counter() - started
    read_cpu = time.process_time() - cpu
    reader.close()
    return {
        "append_seconds": append_seconds,
        "append_cpu_seconds": append_cpu,
        "read_seconds": read_seconds,
        "read_cpu_seconds": read_cpu,
        "nodes": len(found),
        "edges": len(links),
        **memory_mb(),
    }


def step_render(url: str, session: str, state_dir: str, cold: bool) -> dict[str, Any]:
    """``cold``: the first render ever (no tier state yet; it is persisted). Otherwise: a
    fresh engine's first render from the persisted state, then renders after one append."""
    from context import ContextEngine, Policy
    from graph import ConversationGraph

    g = ConversationGraph.open(url, session=session)
    policy = Policy()
    loaded = memory_mb()
    layers_before = len(g.layers())
    started = time.perf_counter()
    cpu = time.process_time()
    engine = ContextEngine(g, policy, budget=BUDGET, state_dir=Path(state_dir))
    rendered = engine.render()
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu
    result: dict[str, Any] = {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "layers_made": len(g.layers()) - layers_before,
        "tokens": rendered.tokens,
        "messages": len(rendered.messages),
        "loaded_rss_mb": loaded["rss_mb"],
    }
    if not cold:
        times = []
        for turn in range(FAST_ROUNDS):
            g.append({"role": "user", "content": f"one more thing ({turn})"})
            began = time.perf_counter()
            engine.render()
            times.append(time.perf_counter() - began)
            g.append({"role": "assistant", "content": f"done ({turn})"})
            engine.render()
        result["append_render_ms"] = statistics.median(times) * 1000
    return {**result, **memory_mb()}


def main(argv: list[str]) -> None:
    step, raw = argv
    args = json.loads(raw)
    steps = {
        "append": lambda: step_append(args["url"], args["session"], args["nodes"]),
        "reopen": lambda: step_reopen(args["url"], args["session"]),
        "cold": lambda: step_render(args["url"], args["session"], args["state_dir"], True),
        "render": lambda: step_render(args["url"], args["session"], args["state_dir"], False),
        "raw": lambda: step_raw(args["raw_path"], args["nodes"]),
    }
    print(json.dumps(steps[step]()))


if __name__ == "__main__":
    main(sys.argv[1:])
