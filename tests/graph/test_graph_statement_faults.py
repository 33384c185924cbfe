"""The harness's database side (``tests/_faults.py``) on the graph's own write paths: each
statement of an append and of a batch fails in turn; what was acknowledged is there after,
and what was not is wholly absent (no half batch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _faults import Faults, each_fault

from graph import ConversationGraph, StoreError

MESSAGES = [
    {"role": "user", "content": "one"},
    {"role": "assistant", "content": "two"},
    {"role": "user", "content": "three"},
]


def _prepare(folder: Path) -> dict[str, Any]:
    graph = ConversationGraph.open(folder / "op.db", session="s1")
    graph.append({"role": "system", "content": "be terse"})
    return {"graph": graph, "folder": folder, "acknowledged": [graph.nodes()[0].id]}


def _append_each(run: dict[str, Any]) -> None:
    for message in MESSAGES:
        run["acknowledged"].append(run["graph"].append(message).id)


def _batch(run: dict[str, Any]) -> None:
    with run["graph"].batch():
        made = [run["graph"].append(message).id for message in MESSAGES]
    run["acknowledged"].extend(made)


def _check(run: dict[str, Any], faults: Faults) -> None:
    run["graph"].close()
    assert faults.raised is None or isinstance(faults.raised, StoreError), repr(faults.raised)
    reopened = ConversationGraph.open(run["folder"] / "op.db", session="s1")
    try:
        stored = [node.id for node in reopened.nodes()]
        assert stored[: len(run["acknowledged"])] == run["acknowledged"]
        assert len(stored) in (1, len(run["acknowledged"]), 1 + len(MESSAGES))
        assert len(stored) == len(run["acknowledged"])  # nothing unacknowledged half-written
    finally:
        reopened.close()


@pytest.mark.parametrize("write", [_append_each, _batch], ids=["append", "batch"])
@pytest.mark.parametrize("mode", ["error", "full"])
def test_each_statement_failing_keeps_acknowledged_nodes_and_no_half_batch(
    tmp_path: Path, write: Any, mode: str
) -> None:
    fired = each_fault(
        tmp_path,
        _prepare,
        write,
        _check,
        kinds=("sql",),
        mode=mode,
        modules=(),
        engines=lambda run: [run["graph"].store.engine],
    )
    assert fired and {point.kind for point in fired} == {"sql"}
