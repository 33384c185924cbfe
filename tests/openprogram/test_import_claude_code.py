"""Claude Code session JSONL → OpenAI messages, on small hand-written sessions."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from openprogram import TraceFormatError
from openprogram.importers import read_claude_code

T0 = "2026-01-01T10:00:00.000Z"


def _record(rtype: str, uuid: str, **fields: Any) -> dict[str, Any]:
    record = {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "sessionId": "sess-1",
        "type": rtype,
        "uuid": uuid,
        "timestamp": T0,
    }
    return record | fields


def _user(uuid: str, content: Any, **fields: Any) -> dict[str, Any]:
    return _record("user", uuid, message={"role": "user", "content": content}, **fields)


def _assistant(uuid: str, message_id: str, block: dict[str, Any], out: int = 1) -> dict[str, Any]:
    message = {
        "model": "claude-test",
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "content": [block],
        "stop_reason": None,
        "usage": {"input_tokens": 10, "output_tokens": out},
    }
    return _record("assistant", uuid, message=message, requestId=f"req-{message_id}")


def _write(path: Path, records: list[Any]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n")
    return path


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"id": call_id, "type": "function", "function": function}


SESSION: list[Any] = [
    {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}},
    _user("u1", "Fix the bug"),
    _assistant("a1", "msg_1", {"type": "thinking", "thinking": "Look first.", "signature": "s"}),
    _assistant("a2", "msg_1", {"type": "text", "text": "Reading both files."}),
    _assistant("a3", "msg_1", {"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": 1}}),
    {"type": "progress", "data": {"type": "hook_progress"}, "uuid": "p1"},
    _user(
        "u2",
        [{"type": "tool_result", "tool_use_id": "t1", "content": "one"}],
        toolUseResult={"stdout": "one"},
    ),
    _assistant(
        "a4", "msg_1", {"type": "tool_use", "id": "t2", "name": "Read", "input": {"p": 2}}, 9
    ),
    _user(
        "u3",
        [
            {
                "type": "tool_result",
                "tool_use_id": "t2",
                "content": [{"type": "text", "text": "no such"}, {"type": "text", "text": "file"}],
                "is_error": True,
            }
        ],
    ),
    _assistant("a5", "msg_2", {"type": "tool_use", "id": "t3", "name": "Bash", "input": {}}),
    _user(
        "u4",
        [
            {"type": "tool_result", "tool_use_id": "t3", "content": "ok", "is_error": False},
            {"type": "text", "text": "also check b.py"},
        ],
    ),
    _record("system", "s1", subtype="stop_hook_summary", content="hooks ran"),
    _record(
        "system",
        "s2",
        subtype="compact_boundary",
        content="Conversation compacted",
        compactMetadata={"trigger": "auto", "preTokens": 1200},
    ),
    _user("u5", "Summary of the session so far.", isCompactSummary=True),
    _user("u6", "Task for the helper", isSidechain=True),
    _assistant("a6", "msg_3", {"type": "text", "text": "Helper done."}) | {"isSidechain": True},
    _assistant("a7", "msg_4", {"type": "text", "text": "All fixed."}),
]


def test_session_becomes_openai_messages(tmp_path: Path) -> None:
    reading = read_claude_code(_write(tmp_path / "s.jsonl", SESSION))
    records = list(reading)
    assert [r.message for r in records] == [
        {"role": "user", "content": "Fix the bug"},
        {
            "role": "assistant",
            "content": "Reading both files.",
            "tool_calls": [_call("t1", "Read", {"p": 1}), _call("t2", "Read", {"p": 2})],
            "thinking": "Look first.",
        },
        {"role": "tool", "tool_call_id": "t1", "content": "one", "is_error": False},
        {"role": "tool", "tool_call_id": "t2", "content": "no such\nfile", "is_error": True},
        {"role": "assistant", "content": "", "tool_calls": [_call("t3", "Bash", {})]},
        {"role": "tool", "tool_call_id": "t3", "content": "ok", "is_error": False},
        {"role": "user", "content": "also check b.py"},
        {
            "role": "system",
            "content": "Conversation compacted (auto trigger, 1200 tokens before)",
        },
        {"role": "user", "content": "Summary of the session so far."},
        {"role": "user", "content": "Task for the helper"},
        {"role": "assistant", "content": "Helper done."},
        {"role": "assistant", "content": "All fixed."},
    ]
    assert [r.marker for r in records][7:9] == ["compact_boundary", "compact_summary"]
    assert sum(r.marker is not None for r in records) == 2
    assert [r.sidechain for r in records] == [False] * 9 + [True, True, False]
    assert reading.session_id == "sess-1"
    assert reading.skipped == [] and reading.warnings == []


def test_meta_and_time(tmp_path: Path) -> None:
    records = list(read_claude_code(_write(tmp_path / "s.jsonl", SESSION)))
    assistant = records[1]
    assert assistant.at == datetime(2026, 1, 1, 10, tzinfo=UTC)
    assert assistant.meta == {
        "uuid": "a1",
        "model": "claude-test",
        # the response's last record, as our four counts
        "usage": {"input": 10, "cache_read": 0, "cache_creation": 0, "output": 9},
        "message_id": "msg_1",
        "request_id": "req-msg_1",
    }
    assert records[2].meta == {"uuid": "u2"}
    assert records[7].meta["compact"] == {"trigger": "auto", "preTokens": 1200}


def _billed(uuid: str, message_id: str, text: str, **usage: Any) -> dict[str, Any]:
    record = _assistant(uuid, message_id, {"type": "text", "text": text})
    record["message"]["usage"] = usage
    return record


FULL_USAGE = {
    "input_tokens": 3,
    "cache_read_input_tokens": 27_797,
    "cache_creation_input_tokens": 932,
    "output_tokens": 1,
    "service_tier": "standard",
    "cache_creation": {"ephemeral_1h_input_tokens": 932},
}


def test_usage_is_our_four_counts_once_per_response(tmp_path: Path) -> None:
    records = [
        _user("u1", "hi"),
        _billed("a1", "msg_1", "part one", **FULL_USAGE),
        _user("u2", "an interjection"),  # splits msg_1 into two messages
        _billed("a2", "msg_1", "part two", **FULL_USAGE | {"output_tokens": 40}),
        _billed("a3", "msg_2", "next", input_tokens=5, output_tokens=2),
    ]
    reading = read_claude_code(_write(tmp_path / "s.jsonl", records))
    replies = [r for r in reading if r.message["role"] == "assistant"]
    assert [r.message["content"] for r in replies] == ["part one", "part two", "next"]
    assert replies[0].meta["usage"] == {
        "input": 3,
        "cache_read": 27_797,
        "cache_creation": 932,
        "output": 1,
    }
    assert "usage" not in replies[1].meta  # the same response: billed once
    assert replies[2].meta["usage"] == {
        "input": 5,
        "cache_read": 0,
        "cache_creation": 0,
        "output": 2,
    }
    assert reading.warnings == []


@pytest.mark.parametrize(
    "usage",
    [{"input_tokens": "10"}, {"input_tokens": 10, "output_tokens": -1}, {"output_tokens": 3}],
)
def test_malformed_usage_is_left_out_with_a_warning(tmp_path: Path, usage: Any) -> None:
    reading = read_claude_code(_write(tmp_path / "s.jsonl", [_billed("a1", "m", "x", **usage)]))
    (reply,) = list(reading)
    assert "usage" not in reply.meta
    assert reading.warnings == ["ignored a malformed message.usage (expected token counts)"]


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.jsonl", [_user("u1", "hi"), "{not json", _user("u2", "yo")])
    with pytest.raises(TraceFormatError) as caught:
        list(read_claude_code(path))
    assert caught.value.path == str(path)
    assert caught.value.where == "line 2"
    assert "JSON object" in caught.value.problem


def test_a_line_of_two_records_back_to_back_reads_as_both(tmp_path: Path) -> None:
    """Claude Code once wrote a record without its newline (a shared session's line 196 is a
    progress record and a summary in a row): both are read, nothing is lost or refused."""
    progress = {"type": "progress", "data": {"type": "hook_progress"}, "uuid": "p1"}
    joined = json.dumps(progress) + json.dumps({"type": "summary", "summary": "s", "leafUuid": "a"})
    path = _write(tmp_path / "s.jsonl", [_user("u1", "hi"), joined, _user("u2", "yo")])
    messages = [r.message for r in read_claude_code(path)]
    assert [m["content"] for m in messages] == ["hi", "yo"]
    half = _write(tmp_path / "half.jsonl", [_user("u1", "hi"), json.dumps(progress) + "{not"])
    with pytest.raises(TraceFormatError) as caught:
        list(read_claude_code(half))
    assert caught.value.where == "line 2"


def test_missing_field_names_json_path(tmp_path: Path) -> None:
    block = {"type": "tool_use", "name": "Read", "input": {}}
    path = _write(tmp_path / "bad.jsonl", [_user("u1", "hi"), _assistant("a1", "m1", block)])
    with pytest.raises(TraceFormatError) as caught:
        list(read_claude_code(path))
    assert caught.value.where == "line 2, $.message.content[0].id"
    assert caught.value.problem == "missing; expected a string"
    assert str(caught.value).startswith(f"{path}:line 2, $.message.content[0].id:")


def test_wrong_type_names_json_path(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.jsonl", [_record("user", "u1", message={"content": 3})])
    with pytest.raises(TraceFormatError, match=r"line 1, \$\.message\.content"):
        list(read_claude_code(path))


def test_skip_bad_counts_and_keeps_the_rest(tmp_path: Path) -> None:
    records = [
        _user("u1", "hi"),
        "{not json",
        "[1, 2]",
        _assistant("a1", "m1", {"type": "tool_use", "name": "Read", "input": {}}),
        _assistant("a2", "m2", {"type": "text", "text": "hello"}),
    ]
    reading = read_claude_code(_write(tmp_path / "bad.jsonl", records), skip_bad=True)
    assert [r.message for r in reading] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    assert [e.where for e in reading.skipped] == [
        "line 2",
        "line 3",
        "line 4, $.message.content[0].id",
    ]


def test_unknown_blocks_warn_and_images_are_placeholders(tmp_path: Path) -> None:
    image = {"type": "image", "source": {"type": "base64", "data": "AAAA"}}
    records = [
        _user("u1", [{"type": "text", "text": "see"}, image]),
        _assistant("a1", "m1", {"type": "redacted_thinking", "data": "xx"}),
        _assistant("a2", "m1", {"type": "text", "text": "seen"}),
    ]
    reading = read_claude_code(_write(tmp_path / "s.jsonl", records))
    assert [r.message for r in reading] == [
        {"role": "user", "content": "see\n[image]"},
        {"role": "assistant", "content": "seen"},
    ]
    assert reading.warnings == ["ignored assistant content block of type 'redacted_thinking'"]
