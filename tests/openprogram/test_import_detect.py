"""Format detection from a file's name and a peek at its first JSON value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openprogram import UnknownFormat
from openprogram.importers import FORMATS, detect_format, read_trace

CASES = {
    "claude.jsonl": '{"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}\n',
    "claude2.jsonl": '{"type": "user", "sessionId": "s", "uuid": "u", "message": {}}\n',
    "rollout.jsonl": '{"timestamp": "2025-01-01T00:00:00Z", "type": "session_meta", "payload": {}}',
    "chat.jsonl": '{"role": "user", "content": "hi"}\n',
    "chat.json": json.dumps([{"role": "user", "content": "hi"}], indent=2),
    "chat2.json": json.dumps({"messages": [{"role": "user", "content": "hi"}]}),
    "run.traj": json.dumps({"history": [], "trajectory": []}, indent=2),
    "other.json": json.dumps({"history": [], "trajectory": []}, indent=2),
    "x.traj.json": json.dumps({"messages": [], "info": {}}),
    "mini.json": json.dumps({"instance_id": "i", "messages": [], "info": {}}, indent=1),
}
EXPECTED = {
    "claude.jsonl": "claude-code",
    "claude2.jsonl": "claude-code",
    "rollout.jsonl": "codex",
    "chat.jsonl": "openai",
    "chat.json": "openai",
    "chat2.json": "openai",
    "run.traj": "swe-agent",
    "other.json": "swe-agent",
    "x.traj.json": "mini-swe-agent",
    "mini.json": "mini-swe-agent",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_detects_each_format(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text(CASES[name])
    assert detect_format(path) == EXPECTED[name]
    assert EXPECTED[name] in FORMATS


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("", "empty"),
        ("\n\n", "empty"),
        ("MIT License\n", "neither JSON nor JSONL"),
        ('{"something": "else"}', "cannot tell which trace format"),
        ("[1, 2]", "cannot tell which trace format"),
    ],
)
def test_unknown_content(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "mystery.txt"
    path.write_text(content)
    with pytest.raises(UnknownFormat, match=problem) as caught:
        detect_format(path)
    assert str(path) in str(caught.value)


def test_read_trace_with_unknown_format_name(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text("[]")
    with pytest.raises(UnknownFormat, match="unknown trace format 'bogus'; known: claude-code"):
        read_trace(path, format="bogus")
    assert list(read_trace(path, format="openai")) == []
