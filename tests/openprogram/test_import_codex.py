"""Codex CLI rollout JSONL → OpenAI messages, on a small hand-written rollout."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from openprogram import TraceFormatError
from openprogram.importers import read_codex


def _line(rtype: str, payload: dict[str, Any], second: int = 0) -> dict[str, Any]:
    return {"timestamp": f"2025-10-29T00:59:{second:02d}.000Z", "type": rtype, "payload": payload}


def _item(**payload: Any) -> dict[str, Any]:
    return _line("response_item", payload)


def _text(role: str, kind: str, text: str) -> dict[str, Any]:
    return _item(type="message", role=role, content=[{"type": kind, "text": text}])


def _write(path: Path, records: list[Any]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n")
    return path


ROLLOUT: list[Any] = [
    _line("session_meta", {"id": "sess-9", "cwd": "/tmp/x", "cli_version": "0.46.0"}),
    _text("developer", "input_text", "You are Codex."),
    _text("user", "input_text", "list the files"),
    _line("event_msg", {"type": "user_message", "message": "list the files"}),
    _line("turn_context", {"cwd": "/tmp/x", "model": "gpt-5-codex"}),
    _item(type="reasoning", summary=[{"type": "summary_text", "text": "**Listing first**"}]),
    _item(
        type="message",
        role="assistant",
        id="msg_1",
        content=[{"type": "output_text", "text": "I'll list them."}],
    ),
    _item(type="function_call", name="shell", arguments='{"command":["ls"]}', call_id="c1"),
    _item(type="function_call_output", call_id="c1", output="a.py\nb.py"),
    _item(type="reasoning", summary=[], encrypted_content="gAAAA"),
    _item(type="function_call", name="shell", arguments='{"command":["cat","a.py"]}', call_id="c2"),
    _item(type="custom_tool_call", name="apply_patch", input="*** Begin Patch", call_id="c3"),
    _item(type="function_call_output", call_id="c2", output={"content": "boom", "success": False}),
    _item(type="custom_tool_call_output", call_id="c3", output="Success"),
    _line("compacted", {"message": "Summary: listed and patched.", "replacement_history": []}),
    _line("event_msg", {"type": "context_compacted"}),
    _text("assistant", "output_text", "Done."),
]


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_rollout_becomes_openai_messages(tmp_path: Path) -> None:
    reading = read_codex(_write(tmp_path / "rollout.jsonl", ROLLOUT))
    records = list(reading)
    assert [r.message for r in records] == [
        {"role": "system", "content": "You are Codex."},
        {"role": "user", "content": "list the files"},
        {
            "role": "assistant",
            "content": "I'll list them.",
            "thinking": "**Listing first**",
            "tool_calls": [_call("c1", "shell", '{"command":["ls"]}')],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                _call("c2", "shell", '{"command":["cat","a.py"]}'),
                _call("c3", "apply_patch", '{"input": "*** Begin Patch"}'),
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "boom", "is_error": True},
        {"role": "tool", "tool_call_id": "c3", "content": "Success"},
        {"role": "system", "content": "Conversation compacted"},
        {"role": "user", "content": "Summary: listed and patched."},
        {"role": "assistant", "content": "Done."},
    ]
    assert [r.marker for r in records][7:9] == ["compact_boundary", "compact_summary"]
    assert sum(r.marker is not None for r in records) == 2
    assert records[2].meta == {"model": "gpt-5-codex", "item_id": "msg_1"}
    assert records[0].at == datetime(2025, 10, 29, 0, 59, tzinfo=UTC)
    assert reading.session_id == "sess-9"
    assert reading.warnings == [] and reading.skipped == []


def test_unknown_items_warn(tmp_path: Path) -> None:
    records = [_item(type="web_search_call", status="completed"), _text("user", "input_text", "x")]
    reading = read_codex(_write(tmp_path / "r.jsonl", records))
    assert [r.message for r in reading] == [{"role": "user", "content": "x"}]
    assert reading.warnings == ["ignored response item type 'web_search_call'"]


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl", [ROLLOUT[0], '{"type": "response_item", "payload": '])
    with pytest.raises(TraceFormatError) as caught:
        list(read_codex(path))
    assert (caught.value.path, caught.value.where) == (str(path), "line 2")


def test_missing_field_names_json_path(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl", [_item(type="function_call_output", output="x")])
    with pytest.raises(TraceFormatError) as caught:
        list(read_codex(path))
    assert caught.value.where == "line 1, $.payload.call_id"
    assert caught.value.problem == "missing; expected a string"


def test_skip_bad_counts(tmp_path: Path) -> None:
    records = [
        "nope",
        _line("response_item", {}) | {"payload": []},
        _item(type="message", role="robot", content=[]),
        _text("user", "input_text", "kept"),
    ]
    reading = read_codex(_write(tmp_path / "r.jsonl", records), skip_bad=True)
    assert [r.message for r in reading] == [{"role": "user", "content": "kept"}]
    assert [e.where for e in reading.skipped] == [
        "line 1",
        "line 2, $.payload",
        "line 3, $.payload.role",
    ]
