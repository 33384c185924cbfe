"""SWE-agent ``.traj`` history → OpenAI messages, function-calling and plain variants."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from openprogram._errors import TraceFormatError
from openprogram.importers import read_swe_agent


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


def test_plain_history_is_kept_as_is(tmp_path: Path) -> None:
    history = [
        {"role": "system", "content": "SETTING", "agent": "primary"},
        {"role": "user", "content": "Issue", "agent": "primary"},
        {
            "role": "assistant",
            "content": "Look around.\n\n```\nls\n```",
            "thought": "Look around.",
            "action": "ls\n",
            "agent": "primary",
        },
        {"role": "user", "content": "a.py\n(Open file: n/a)", "agent": "primary"},
    ]
    records = list(read_swe_agent(_write(tmp_path / "p.traj", history)))
    assert [r.message for r in records] == [
        {"role": "system", "content": "SETTING"},
        {"role": "user", "content": "Issue"},
        {"role": "assistant", "content": "Look around.\n\n```\nls\n```"},
        {"role": "user", "content": "a.py\n(Open file: n/a)"},
    ]
    assert records[2].meta == {"thought": "Look around.", "action": "ls\n", "agent": "primary"}


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
