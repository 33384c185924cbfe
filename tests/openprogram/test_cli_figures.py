"""Figures the CLI prints add up (issue 22, item 12): `compact` and `collapses` print one
quantity as "tokens saved", and `show` marks where each branch's head is after a checkout."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from graph import ConversationGraph
from openprogram.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _session(db: Path) -> list[str]:
    graph = ConversationGraph.open(str(db), session="s1")
    graph.append({"role": "user", "content": "task"})
    users = []
    for i in range(12):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
        graph.append({"role": "assistant", "content": f"reading part_{i}.py", "tool_calls": [call]})
        graph.append(
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"def f_{i}(): ...\n" * 300}
        )
        users.append(graph.append({"role": "user", "content": f"next {i}"}).id)
    return users


def test_compact_and_collapses_print_the_same_tokens_saved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "a.db"
    _session(db)
    code, out, _ = run(capsys, "--db", str(db), "compact", "s1")
    found = re.search(r"tokens saved ([\d,]+) \(the covered messages in full", out)
    assert code == 0 and found, out
    code, listed, _ = run(capsys, "--db", str(db), "collapses", "s1", "--json")
    [layer] = json.loads(listed)
    assert int(found.group(1).replace(",", "")) == layer["tokens_saved"] > 0
    code, table, _ = run(capsys, "--db", str(db), "collapses", "s1")
    assert code == 0 and f"{layer['tokens_saved']:,}" in table
    assert "tokens saved: the covered messages in full, less the layer's summary" in table


def test_show_marks_the_head_after_a_checkout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "a.db"
    users = _session(db)
    assert run(capsys, "--db", str(db), "checkout", "s1", users[3])[0] == 0
    code, out, _ = run(capsys, "--db", str(db), "show", "s1")
    assert code == 0
    tree = [line for line in out.splitlines() if line.startswith(("├──", "└──"))]
    [line] = [line for line in tree if users[3] in line]
    assert "◀ head of main" in line
    [old] = [line for line in tree if users[-1] in line]
    assert "◀ head of main-1" in old  # where main was, kept as a branch
