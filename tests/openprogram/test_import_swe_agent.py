"""SWE-agent ``.traj`` history → OpenAI messages, function-calling and plain variants."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graph import ConversationGraph, Tool
from openprogram import TraceFormatError
from openprogram.importers import import_trace, read_swe_agent


def _write(path: Path, history: Any, **extra: Any) -> Path:
    document = {"environment": "swe_main", "trajectory": [], "history": history, "info": {}}
    path.write_text(json.dumps(document | extra, indent=2))
    return path


CALL = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"c":1}'}}

FUNCTION_CALLING: list[dict[str, Any]] = [
    {"role": "system", "content": "SETTING: ...", "agent": "main", "message_type": "system_prompt"},
    {"role": "user", "content": "Demo issue", "agent": "main", "is_demo": True},
    {
        "role": "user",
        "content": [{"type": "text", "text": "Fix it", "cache_control": {"type": "ephemeral"}}],
        "agent": "main",
        "message_type": "observation",
    },
    {
        "role": "assistant",
        "content": "Let's look.",
        "thought": "Let's look.",
        "action": "ls",
        "agent": "main",
        "tool_calls": [CALL],
        "message_type": "action",
    },
    {
        "role": "tool",
        "content": "a.py",
        "agent": "main",
        "message_type": "observation",
        "tool_call_ids": ["call_1"],
    },
]


def test_function_calling_history(tmp_path: Path) -> None:
    reading = read_swe_agent(_write(tmp_path / "x__y-1.traj", FUNCTION_CALLING))
    records = list(reading)
    assert [r.message for r in records] == [
        {"role": "system", "content": "SETTING: ..."},
        {"role": "user", "content": "Fix it"},
        {"role": "assistant", "content": "Let's look.", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.py"},
    ]
    assert records[2].meta == {"action": "ls", "agent": "main", "message_type": "action"}
    assert records[3].meta["tool_call_ids"] == ["call_1"]
    assert reading.session_id == "x__y-1"


def _action(call_id: str, name: str, command: str) -> dict[str, Any]:
    arguments = json.dumps({"command": command})
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


OLDER_FORM: list[dict[str, Any]] = [
    {"role": "system", "content": "SETTING", "agent": "primary"},
    {"role": "user", "content": "Demo: open x.py", "agent": "primary", "is_demo": True},
    {"role": "user", "content": "Issue", "agent": "primary"},
    {
        "role": "assistant",
        "content": "Look around.\n\n```\nls -a | head\n```",
        "thought": "Look around.\n\n",
        "action": "ls -a | head\n",
        "agent": "primary",
    },
    {"role": "user", "content": "a.py\n(Open file: n/a)", "agent": "primary"},
    {
        "role": "assistant",
        "content": "Open it.\n```\nopen a.py 10\n```",
        "action": "open a.py 10\n",
        "agent": "primary",
    },
    {"role": "user", "content": "[File: a.py]", "agent": "primary"},
    {"role": "assistant", "content": "Done.\n```\nsubmit\n```", "action": "submit\n"},
]


def test_older_actions_become_tool_calls_and_observations_their_results(tmp_path: Path) -> None:
    reading = read_swe_agent(_write(tmp_path / "p.traj", OLDER_FORM))
    records = list(reading)
    assert [r.message for r in records] == [
        {"role": "system", "content": "SETTING"},
        {"role": "user", "content": "Issue"},
        {
            "role": "assistant",
            "content": "Look around.",
            "tool_calls": [_action("action_3", "bash", "ls -a | head\n")],
        },
        {"role": "tool", "tool_call_id": "action_3", "content": "a.py\n(Open file: n/a)"},
        {
            "role": "assistant",
            "content": "Open it.",
            "tool_calls": [_action("action_5", "open", "open a.py 10\n")],
        },
        {"role": "tool", "tool_call_id": "action_5", "content": "[File: a.py]"},
        {
            "role": "assistant",
            "content": "Done.",
            "tool_calls": [_action("action_7", "submit", "submit\n")],
        },
    ]
    assert records[2].meta == {"agent": "primary"}
    assert records[3].meta == {"agent": "primary"}
    assert reading.warnings == [] and reading.skipped == []


def test_older_form_imports_with_paired_calls(tmp_path: Path) -> None:
    graph = ConversationGraph.memory()
    stats = import_trace(_write(tmp_path / "p.traj", OLDER_FORM), graph)
    assert (stats.tool_calls, stats.unanswered, stats.messages) == (3, 1, 7)
    tools = [n for n in graph.nodes() if isinstance(n.payload, Tool)]
    assert [t.payload.name for t in tools] == ["bash", "open", "submit"]
    assert [t.result.content if t.result else None for t in tools] == [
        "a.py\n(Open file: n/a)",
        "[File: a.py]",
        None,
    ]


@pytest.mark.parametrize(
    ("action", "name"),
    [
        ("open src/a.py 293\n", "open"),
        ("edit 287:295\n    x = [1] | 2\nend_of_edit\n", "edit"),
        ('search_dir "def parse;" src\n', "search_dir"),
        ('find_file "numpy_handler.py"\n', "find_file"),
        ("python reproduce_bug.py\n", "python"),
        ('python -c "import a; print(a)"', "python"),
        ("submit\n", "submit"),
        ("ls -a | grep py\n", "bash"),
        ("cd src && pytest -x", "bash"),
        ("echo $HOME > out.txt", "bash"),
        ("./run.sh --fast", "bash"),
        ("FOO=1 make", "bash"),
    ],
)
def test_action_tool_name(tmp_path: Path, action: str, name: str) -> None:
    history = [{"role": "assistant", "content": "", "thought": "t", "action": action}]
    (record,) = read_swe_agent(_write(tmp_path / "n.traj", history))
    (call,) = record.message["tool_calls"]
    assert call["function"]["name"] == name
    assert json.loads(call["function"]["arguments"]) == {"command": action}


def test_a_turn_without_an_observation_leaves_the_next_user_message_alone(
    tmp_path: Path,
) -> None:
    history = [
        {"role": "assistant", "content": "x", "thought": "x", "action": "ls"},
        {"role": "assistant", "content": "format error, retry", "action": ""},
        {"role": "user", "content": "Please answer with one command."},
    ]
    messages = [r.message for r in read_swe_agent(_write(tmp_path / "w.traj", history))]
    assert [m["role"] for m in messages] == ["assistant", "assistant", "user"]
    assert "tool_calls" not in messages[1]


def test_single_tool_call_id_and_several_ids(tmp_path: Path) -> None:
    two = {**CALL, "id": "call_2"}
    history = [
        {"role": "assistant", "content": "", "tool_calls": [CALL, two]},
        {"role": "tool", "content": "both", "tool_call_ids": ["call_1", "call_2"]},
        {"role": "assistant", "content": "", "tool_calls": [{**CALL, "id": "call_3"}]},
        {"role": "tool", "content": "three", "tool_call_id": "call_3"},
    ]
    reading = read_swe_agent(_write(tmp_path / "t.traj", history))
    messages = [r.message for r in reading]
    assert messages[1:3] == [
        {"role": "tool", "tool_call_id": "call_1", "content": "both"},
        {"role": "tool", "tool_call_id": "call_2", "content": ""},
    ]
    assert messages[4] == {"role": "tool", "content": "three", "tool_call_id": "call_3"}
    assert reading.warnings == [
        "a tool reply answers several calls; its text goes to the first one"
    ]


def test_missing_history(tmp_path: Path) -> None:
    path = tmp_path / "x.traj"
    path.write_text(json.dumps({"trajectory": []}))
    with pytest.raises(TraceFormatError) as caught:
        list(read_swe_agent(path))
    assert (caught.value.path, caught.value.where) == (str(path), "$.history")


def test_bad_entries_name_json_path_and_skip_bad_counts(tmp_path: Path) -> None:
    history = [
        {"role": "user", "content": "ok"},
        {"role": "tool", "content": "x", "tool_call_ids": []},
        {"role": "assistant", "content": 7},
        "not a message",
    ]
    path = _write(tmp_path / "b.traj", history)
    with pytest.raises(TraceFormatError) as caught:
        list(read_swe_agent(path))
    assert caught.value.where == "$.history[1].tool_call_ids"
    reading = read_swe_agent(path, skip_bad=True)
    assert [r.message for r in reading] == [{"role": "user", "content": "ok"}]
    assert [e.where for e in reading.skipped] == [
        "$.history[1].tool_call_ids",
        "$.history[2].content",
        "$.history[3]",
    ]
