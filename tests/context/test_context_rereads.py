"""Tier ``rereads``: a file read superseded by a newer read covering it, or by a write or edit
of the file, becomes a note pointing to its node."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _context_helpers import policy, start

from context import ContextEngine, read_target, tool_pair_problems, write_target
from graph import ConversationGraph, node_handle

CASCADE = ("rereads", "emergency")


@pytest.mark.parametrize(
    ("name", "arguments", "target"),
    [
        ("Read", {"file_path": "a.py"}, ("a.py", 1, None)),
        ("Read", {"file_path": "a.py", "offset": 10, "limit": 5}, ("a.py", 10, 14)),
        ("Read", {"file_path": "a.py", "limit": 50}, ("a.py", 1, 50)),
        ("read_file", {"path": "b.py"}, ("b.py", 1, None)),
        (
            "str_replace_editor",
            {"command": "view", "path": "b.py", "view_range": [3, 9]},
            ("b.py", 3, 9),
        ),
        ("str_replace_editor", {"command": "create", "path": "b.py", "file_text": ""}, None),
        ("bash", {"command": "cat src/x.py"}, ("src/x.py", 1, None)),
        ("bash", {"command": "sed -n '5,20p' src/x.py"}, ("src/x.py", 5, 20)),
        ("bash", {"command": "nl -ba src/x.py | sed -n '5,20p'"}, ("src/x.py", 5, 20)),
        ("bash", {"command": "head -n 30 src/x.py"}, ("src/x.py", 1, 30)),
        ("bash", {"command": "cat a.py b.py"}, None),
        ("bash", {"command": "cat a.py | grep x"}, None),
        ("bash", {"command": "grep -n foo a.py"}, None),
        ("bash", {"command": "cat 'unclosed"}, None),
        ("Grep", {"pattern": "x", "path": "a.py"}, None),
        ("Read", {"file_path": "a.py", "pages": "1-2"}, None),
        ("Read", {}, None),
    ],
)
def test_read_targets(name: str, arguments: dict[str, object], target: object) -> None:
    assert read_target(name, arguments) == target


def test_write_targets_and_coverage() -> None:
    assert write_target("Write", {"file_path": "a.py", "content": ""}) == "a.py"
    assert write_target("str_replace_editor", {"command": "create", "path": "a.py"}) == "a.py"
    # an edit changes some lines: the rest of an earlier read still holds
    assert write_target("Edit", {"file_path": "a.py", "old_string": "x"}) is None
    assert write_target("bash", {"command": "sed -i 's/a/b/' src/x.py"}) is None
    assert write_target("str_replace_editor", {"command": "view", "path": "a.py"}) is None
    assert write_target("Read", {"file_path": "a.py"}) is None


def read(
    g: ConversationGraph, call_id: str, name: str, arguments: dict[str, object], output: str
) -> str:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    g.append({"role": "assistant", "content": None, "tool_calls": [call]})
    return g.append({"role": "tool", "tool_call_id": call_id, "content": output}).id


def call(call_id: str, name: str, arguments: dict[str, object]) -> dict[str, object]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def body(tag: str) -> str:
    return "".join(f"{tag} line {i}: value_{i} = compute_{tag}({i})\n" for i in range(120))


def session() -> tuple[ConversationGraph, dict[str, str]]:
    g = ConversationGraph.memory("rereads")
    start(g)
    ids = {
        "whole": read(g, "c1", "Read", {"file_path": "a.py"}, body("first")),
        "window": read(
            g, "c2", "Read", {"file_path": "b.py", "offset": 1, "limit": 60}, body("b1")
        ),
        "other": read(
            g, "c3", "Read", {"file_path": "b.py", "offset": 61, "limit": 60}, body("b2")
        ),
        "rewritten": read(g, "c4", "bash", {"command": "cat c.py"}, body("c")),
        "edited": read(g, "c8", "bash", {"command": "cat d.py"}, body("d")),
    }
    read(g, "c5", "Read", {"file_path": "a.py"}, body("second"))
    read(g, "c6", "Read", {"file_path": "b.py", "offset": 1, "limit": 30}, body("b3"))
    write = call("c7", "Write", {"file_path": "c.py", "content": "new"})
    edit = call("c9", "Edit", {"file_path": "d.py", "old_string": "a", "new_string": "b"})
    g.append({"role": "assistant", "content": None, "tool_calls": [write, edit]})
    g.append({"role": "tool", "tool_call_id": "c7", "content": "written"})
    g.append({"role": "tool", "tool_call_id": "c9", "content": "edited"})
    g.append({"role": "assistant", "content": "done"})
    return g, ids


def view(path: str, first: int | None = None, last: int | None = None) -> dict[str, object]:
    """A read of ``path`` (lines ``first``-``last``, or the whole file)."""
    arguments: dict[str, object] = {"command": "view", "path": path}
    if first is not None:
        arguments["view_range"] = [first, last]
    return arguments


@pytest.mark.parametrize(
    ("older", "newer", "superseded"),
    [
        (view("a.py", 10, 20), view("a.py"), True),
        (view("a.py", 10, 20), view("a.py", 5, 30), True),
        (view("a.py", 10, 20), view("a.py", 11, 30), False),
        (view("a.py", 1, 2), view("b.py"), False),
        (view("a.py"), view("a.py", 5, 9), False),
    ],
)
def test_a_read_is_superseded_only_by_a_newer_read_of_every_line(
    tmp_path: Path, older: dict[str, object], newer: dict[str, object], superseded: bool
) -> None:
    g = ConversationGraph.memory("ranges")
    start(g)
    read(g, "old", "str_replace_editor", older, body("old"))
    read(g, "new", "str_replace_editor", newer, body("new"))
    g.append({"role": "assistant", "content": "done"})
    pol = policy(tmp_path, cascade=CASCADE, always=())
    full = ContextEngine(g, pol, budget=1_000_000).render()
    rendered = ContextEngine(g, pol, budget=full.tokens - 100).render()
    noted = [
        m["tool_call_id"]
        for m in rendered.messages
        if m["role"] == "tool" and "superseded read" in str(m["content"])
    ]
    assert noted == (["old"] if superseded else [])


def test_over_budget_the_superseded_reads_become_notes_and_stay(tmp_path: Path) -> None:
    g, ids = session()
    pol = policy(tmp_path, cascade=CASCADE, always=())
    full = ContextEngine(g, pol, budget=1_000_000).render()
    e = ContextEngine(g, pol, budget=full.tokens - 100)
    rendered = e.render()
    assert rendered.tokens < full.tokens - 1_000
    assert not tool_pair_problems(rendered.messages)
    notes = {
        m["tool_call_id"]: m["content"]
        for m in rendered.messages
        if m["role"] == "tool" and "superseded read" in str(m["content"])
    }
    # the b.py windows do not cover each other; an edit leaves d.py's read standing
    assert set(notes) == {"c1", "c4"}
    assert notes["c1"].startswith("[superseded read of a.py: ")  # the whole file, no lines
    assert f'read_output("{node_handle(g.get(ids["whole"]))}")' in notes["c1"]
    assert "a.py" in notes["c1"] and "c.py" in notes["c4"]
    g.append({"role": "user", "content": "thanks"})
    later = e.render()
    kept = [
        m for m in later.messages if m["role"] == "tool" and "superseded read" in str(m["content"])
    ]
    assert len(kept) == 2  # decided once, re-applied on every render (a stable prefix)


def test_a_restarted_engine_keeps_the_notes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'rereads.db'}"
    g = ConversationGraph.open(url, session="rereads")
    try:
        start(g)
        read(g, "c1", "Read", {"file_path": "a.py"}, body("first"))
        read(g, "c2", "Read", {"file_path": "a.py"}, body("second"))
        g.append({"role": "assistant", "content": "done"})
        pol = policy(tmp_path, cascade=CASCADE, always=())
        full = ContextEngine(g, pol, budget=1_000_000).render()
        budget = full.tokens - 100
        first = ContextEngine(g, pol, budget=budget).render()
        assert any("superseded read" in str(m["content"]) for m in first.messages)
    finally:
        g.close()
    again = ConversationGraph.open(url, session="rereads")
    try:
        rendered = ContextEngine(again, pol, budget=budget).render()
        assert json.dumps(rendered.messages) == json.dumps(first.messages)
        assert rendered.records == []
    finally:
        again.close()
