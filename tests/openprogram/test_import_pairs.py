"""A tool result that arrives twice (in every format whose results name their call): the
call the importer adds for the second one gets an id of its own, so the stored conversation
and ``export --format openai`` keep valid tool pairs, and the warning says what happened."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from context import tool_pair_problems
from graph import ConversationGraph, dispose_engines
from openprogram.cli import main
from openprogram.importers import import_trace

T0 = "2026-01-01T10:00:00.000Z"


def _jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _openai(path: Path) -> Path:
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py again"},
        {"role": "assistant", "content": "one file"},
    ]
    target = path / "chat.json"
    target.write_text(json.dumps(messages))
    return target


def _claude_code(path: Path) -> Path:
    def record(rtype: str, uuid: str, message: dict[str, Any]) -> dict[str, Any]:
        return {
            "parentUuid": None,
            "isSidechain": False,
            "userType": "external",
            "sessionId": "sess-1",
            "type": rtype,
            "uuid": uuid,
            "timestamp": T0,
            "message": message,
        }

    def result(text: str) -> dict[str, Any]:
        block = {"type": "tool_result", "tool_use_id": "c1", "content": text}
        return {"role": "user", "content": [block]}

    use = {"type": "tool_use", "id": "c1", "name": "Bash", "input": {"command": "ls"}}
    assistant = {"id": "m1", "type": "message", "role": "assistant", "content": [use]}
    answer = {"id": "m2", "type": "message", "role": "assistant"}
    answer["content"] = [{"type": "text", "text": "one file"}]
    records = [
        record("user", "u1", {"role": "user", "content": "list"}),
        record("assistant", "a1", assistant),
        record("user", "u2", result("a.py")),
        record("user", "u3", result("a.py again")),
        record("assistant", "a2", answer),
    ]
    return _jsonl(path / "session.jsonl", records)


def _codex(path: Path) -> Path:
    def item(**payload: Any) -> dict[str, Any]:
        return {
            "timestamp": "2025-10-29T00:59:00.000Z",
            "type": "response_item",
            "payload": payload,
        }

    text = [{"type": "input_text", "text": "list"}]
    records = [
        {"timestamp": "2025-10-29T00:59:00.000Z", "type": "session_meta", "payload": {"id": "x"}},
        item(type="message", role="user", content=text),
        item(type="function_call", name="shell", arguments='{"command":["ls"]}', call_id="c1"),
        item(type="function_call_output", call_id="c1", output="a.py"),
        item(type="function_call_output", call_id="c1", output="a.py again"),
        item(type="message", role="assistant", content=[{"type": "output_text", "text": "ok"}]),
    ]
    return _jsonl(path / "rollout.jsonl", records)


def _swe_agent(path: Path) -> Path:
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    history = [
        {"role": "system", "content": "setting", "agent": "main"},
        {"role": "user", "content": "fix it", "agent": "main", "message_type": "observation"},
        {
            "role": "assistant",
            "content": "look",
            "agent": "main",
            "tool_calls": [call],
            "message_type": "action",
        },
        {"role": "tool", "content": "a.py", "agent": "main", "tool_call_ids": ["c1"]},
        {"role": "tool", "content": "a.py again", "agent": "main", "tool_call_ids": ["c1"]},
    ]
    document = {"environment": "swe_main", "trajectory": [], "history": history, "info": {}}
    target = path / "run.traj"
    target.write_text(json.dumps(document))
    return target


FORMATS: dict[str, Callable[[Path], Path]] = {
    "openai": _openai,
    "claude-code": _claude_code,
    "codex": _codex,
    "swe-agent": _swe_agent,
}


@pytest.mark.parametrize("name", FORMATS)
def test_a_result_that_arrives_twice(tmp_path: Path, name: str) -> None:
    trace = FORMATS[name](tmp_path)
    graph = ConversationGraph.memory("s")
    stats = import_trace(trace, graph, format=name)
    messages = graph.to_openai()
    assert tool_pair_problems(messages) == []
    calls = [c["id"] for m in messages for c in m.get("tool_calls") or ()]
    assert calls == ["c1", "c1~2"]
    results = [(m["tool_call_id"], m["content"]) for m in messages if m["role"] == "tool"]
    assert [r[0] for r in results] == ["c1", "c1~2"]
    assert "again" in str(results[1][1])  # the second result is kept, not dropped
    assert stats.warnings == [
        "tool result 'c1' arrived again after its call was answered; kept as the result of "
        "a synthetic call 'c1~2'"
    ]


def test_the_export_keeps_valid_pairs(tmp_path: Path) -> None:
    db = tmp_path / "op.db"
    trace = _openai(tmp_path)
    assert main(["--db", str(db), "import", str(trace), "--session", "s"]) == 0
    out = tmp_path / "out.json"
    assert main(["--db", str(db), "export", "s", str(out), "--format", "openai"]) == 0
    assert tool_pair_problems(json.loads(out.read_text())) == []
    dispose_engines()
