"""OpenAI chat messages (JSON list, ``{"messages": [...]}``, JSONL) → canonical messages."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from openprogram import TraceFormatError
from openprogram.importers import read_openai

MESSAGES: list[dict[str, Any]] = [
    {"role": "developer", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "What is in"}, {"type": "image_url"}]},
    {
        "role": "assistant",
        "content": None,
        "reasoning_content": "Need to look.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "look", "arguments": {"a": 1}}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "a cat", "name": "look"},
    {"role": "assistant", "content": "A cat.", "timestamp": "2025-01-02T03:04:05+01:00"},
]

EXPECTED: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is in\n[image]"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "look", "arguments": '{"a": 1}'}}
        ],
        "thinking": "Need to look.",
    },
    {"role": "tool", "content": "a cat", "tool_call_id": "c1"},
    {"role": "assistant", "content": "A cat."},
]


@pytest.mark.parametrize("shape", ["list", "object", "jsonl"])
def test_every_shape_gives_the_same_messages(tmp_path: Path, shape: str) -> None:
    if shape == "jsonl":
        path = tmp_path / "chat.jsonl"
        path.write_text("".join(json.dumps(m) + "\n\n" for m in MESSAGES))
    else:
        path = tmp_path / "chat.json"
        document: Any = MESSAGES if shape == "list" else {"messages": MESSAGES}
        path.write_text(json.dumps(document, indent=2))
    reading = read_openai(path)
    records = list(reading)
    assert [r.message for r in records] == EXPECTED
    assert records[3].meta == {"name": "look"}
    assert records[4].at == datetime(2025, 1, 2, 2, 4, 5, tzinfo=UTC)
    assert reading.session_id == "chat"


def test_missing_role_names_json_path(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}, {"content": "x"}]}))
    with pytest.raises(TraceFormatError) as caught:
        list(read_openai(path))
    assert (caught.value.path, caught.value.where) == (str(path), "$.messages[1].role")
    assert caught.value.problem == "missing; expected a string"


def test_bad_tool_call_names_json_path(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    call = {"id": "c1", "type": "function", "function": {"arguments": "{}"}}
    path.write_text(json.dumps([{"role": "assistant", "content": "", "tool_calls": [call]}]))
    with pytest.raises(TraceFormatError, match=r"\$\[0\]\.tool_calls\[0\]\.function\.name"):
        list(read_openai(path))


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text('[\n  {"role": "user", "content": "hi"},\n  {"role": \n]')
    with pytest.raises(TraceFormatError) as caught:
        list(read_openai(path))
    assert caught.value.where == "line 4"


def test_not_a_message_list(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"conversation": []}))
    with pytest.raises(TraceFormatError) as caught:
        list(read_openai(path))
    assert caught.value.where == "$.messages"


def test_jsonl_malformed_line_and_skip_bad(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    lines = ['{"role": "user", "content": "a"}', "{oops", '{"role": "robot"}', '{"role": "user"}']
    path.write_text("\n".join(lines))
    with pytest.raises(TraceFormatError) as caught:
        list(read_openai(path))
    assert caught.value.where == "line 2"
    reading = read_openai(path, skip_bad=True)
    assert [r.message for r in reading] == [
        {"role": "user", "content": "a"},
        {"role": "user", "content": ""},
    ]
    assert [e.where for e in reading.skipped] == ["line 2", "line 3, $.role"]
