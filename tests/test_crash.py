"""SIGKILL at random points of appending (in a batch too), rendering (offload files and
records being written), making layers (a manual collapse, a compaction, a budget collapse)
and writing records. After each kill: everything acknowledged is stored, no layer is half
written, seqs are 1..n once each, the session reopens and renders a valid prompt, records
read (a torn JSONL line is skipped with a warning) and the next offload works.

The kill delays are seeded, so a failure replays; each mode runs a few short rounds on one
session, each round starting where the killed one left it.
"""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

import pytest
from _children import check_session, finish, start, wait_ready

from context import ContextEngine, Policy
from graph import ConversationGraph, text_of

ROUNDS = 3
SEED = 20_240_601
_OFFLOADED = re.compile(r"\[output offloaded: [^\]]*read_output\(\"(n\d+)\"")


def _crash_rounds(mode: str, url: str, tmp_path: Path, budget: int) -> None:
    rng = random.Random(f"{SEED}-{mode}")
    state = tmp_path / "state"
    state.mkdir()
    acked: dict[str, list[str]] = {"node": [], "layer": [], "record": []}
    for kill in range(1, ROUNDS + 1):
        child = start(mode, url, "s", state, rng.randrange(10**6))
        try:
            wait_ready(child)
            time.sleep(rng.uniform(0.05, 0.6))
        finally:
            stderr = finish(child, kill=True)
        assert child.process.returncode == -9, stderr  # killed, not failed on its own
        for kind, done in acked.items():
            done.extend(child.acked(kind))
        graph = check_session(
            url,
            "s",
            state,
            nodes=acked["node"],
            layers=acked["layer"],
            records=acked["record"],
            budget=budget,
            kills=kill,
        )
        _check_offload(graph, state, budget)
        graph.close()
    assert acked["node"] or acked["record"], "no round got anything done before its kill"


def _check_offload(graph: ConversationGraph, state: Path, budget: int) -> None:
    """Offloaded files are whole; with them gone (a leftover temporary file may stay), a
    fresh engine offloads again, and a new long output is offloaded too."""
    folder = state / "tool_results" / graph.session
    outputs = {n.id: text_of(n.result.content) for n in graph.nodes() if n.result is not None}
    for path in folder.glob("*.txt"):
        assert path.read_text() == outputs[path.stem], f"{path} is not the whole output"
        path.unlink()
    call_id = f"after{graph.last_seq}"
    graph.append({"role": "user", "content": "one more"})
    graph.append({"role": "assistant", "content": None, "tool_calls": [_call(call_id)]})
    graph.append({"role": "tool", "tool_call_id": call_id, "content": "long line\n" * 400})
    policy = Policy(offload_chars=1_500, offload_share=None)
    engine = ContextEngine(graph, policy, budget=budget, state_dir=state)
    rendered = engine.render()
    # (Placeholders only: a summary may quote one whose file this check deleted above.)
    shown = [text_of(m["content"]) for m in rendered.messages if m["role"] == "tool"]
    handles = [h for text in shown for h in _OFFLOADED.findall(text)]
    files = [folder / f"{graph.get(h).id}.txt" for h in handles]  # a prompt names no file
    assert files, "the new long output was not offloaded"
    outputs = {n.id: text_of(n.result.content) for n in graph.nodes() if n.result is not None}
    for path in files:
        assert path.read_text() == outputs[path.stem]
    for leftover in folder.glob(".*.tmp"):  # a write the kill interrupted: harmless
        assert leftover.stem.split(".")[1] in outputs


def _call(call_id: str) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": "{}"}}


@pytest.mark.parametrize("mode", ["append", "batch"])
def test_a_killed_writer_loses_nothing_acknowledged(
    mode: str, store_url: str, tmp_path: Path
) -> None:
    # a budget the thousands of appended rounds fit in: the first render of a session that
    # large collapses hundreds of segments, which takes seconds (a scale matter, not ours)
    _crash_rounds(mode, store_url, tmp_path, 1_000_000)


@pytest.mark.parametrize("mode", ["render", "layers", "records"])
def test_a_killed_engine_leaves_a_sound_session(mode: str, tmp_path: Path) -> None:
    _crash_rounds(mode, f"sqlite:///{tmp_path}/op.db", tmp_path, 2_500)
