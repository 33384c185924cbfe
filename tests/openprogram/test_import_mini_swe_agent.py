"""mini-swe-agent trajectories → OpenAI messages with ``bash`` tool calls."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from openprogram import TraceFormatError
from openprogram.importers import read_mini_swe_agent

USAGE = {"prompt_tokens": 1990, "completion_tokens": 180, "total_tokens": 2170}


def _assistant(content: str, *, reasoning: str | None = None) -> dict[str, Any]:
    reply = {"role": "assistant", "content": content, "refusal": None, "reasoning": reasoning}
    response = {
        "id": "gen-1",
        "provider": "Google",
        "model": "google/gemini-test",
        "object": "chat.completion",
        "created": 1763511695,
        "choices": [{"index": 0, "finish_reason": "stop", "message": reply}],
        "usage": USAGE,
    }
    return {"role": "assistant", "content": content, "extra": {"response": response}}


def _write(path: Path, messages: Any) -> Path:
    document = {
        "info": {"exit_status": "Submitted", "submission": "", "model_stats": {}},
        "messages": messages,
        "trajectory_format": "mini-swe-agent-1",
        "instance_id": "astro__astro-1",
    }
    path.write_text(json.dumps(document, indent=2))
    return path


TWO_BLOCKS = "THOUGHT: two.\n\n```bash\nls\n```\n\n```bash\npwd\n```"
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "<pr_description>Fix it</pr_description>"},
    _assistant("THOUGHT: look around.\n\n```bash\nls -R\n```", reasoning="**Exploring**"),
    {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
    _assistant(TWO_BLOCKS),
    {"role": "user", "content": "Please always provide EXACTLY ONE action, found 2 actions."},
    _assistant("THOUGHT: test.\n```bash\npython -c 'import a'\n```\n"),
    {"role": "user", "content": "<returncode>1</returncode>\n<output>\nboom\n</output>"},
    _assistant("```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff\n```"),
    {"role": "user", "content": "diff --git a/a.py b/a.py"},
]


def _call(index: int, command: str) -> list[dict[str, Any]]:
    arguments = json.dumps({"command": command})
    return [
        {
            "id": f"call_{index}",
            "type": "function",
            "function": {"name": "bash", "arguments": arguments},
        }
    ]


def test_bash_blocks_become_tool_calls(tmp_path: Path) -> None:
    reading = read_mini_swe_agent(_write(tmp_path / "astro__astro-1.traj.json", MESSAGES))
    records = list(reading)
    assert [r.message for r in records] == [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "<pr_description>Fix it</pr_description>"},
        {
            "role": "assistant",
            "content": "THOUGHT: look around.",
            "tool_calls": _call(2, "ls -R"),
            "thinking": "**Exploring**",
        },
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "content": "<returncode>0</returncode>\n<output>\na.py\n</output>",
            "is_error": False,
        },
        {"role": "assistant", "content": TWO_BLOCKS},
        {"role": "user", "content": "Please always provide EXACTLY ONE action, found 2 actions."},
        {
            "role": "assistant",
            "content": "THOUGHT: test.",
            "tool_calls": _call(6, "python -c 'import a'"),
        },
        {
            "role": "tool",
            "tool_call_id": "call_6",
            "content": "<returncode>1</returncode>\n<output>\nboom\n</output>",
            "is_error": True,
        },
        {
            "role": "assistant",
            "content": "",
            "tool_calls": _call(8, "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"),
        },
        {"role": "tool", "tool_call_id": "call_8", "content": "diff --git a/a.py b/a.py"},
    ]
    assert records[2].meta == {
        "model": "google/gemini-test",
        "usage": USAGE,
        "provider": "Google",
        "response_id": "gen-1",
    }
    assert records[2].at == datetime.fromtimestamp(1763511695, UTC)
    assert records[3].at is None
    assert reading.session_id == "astro__astro-1"


def test_last_call_without_output_stays_unanswered(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "```bash\nls\n```"},
    ]
    records = list(read_mini_swe_agent(_write(tmp_path / "a.traj.json", messages)))
    assert records[-1].message == {"role": "assistant", "content": "", "tool_calls": _call(1, "ls")}


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "a.traj.json"
    path.write_text('{\n  "messages": [\n    {"role": "user",, "content": "x"}\n  ]\n}')
    with pytest.raises(TraceFormatError) as caught:
        list(read_mini_swe_agent(path))
    assert (caught.value.path, caught.value.where) == (str(path), "line 3")


def test_bad_messages_name_json_path_and_skip_bad_counts(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "task"},
        {"content": "no role"},
        {"role": "assistant", "content": "```bash\nls\n```"},
        {"role": "user", "content": ["not", 3]},
        {"role": "user", "content": "next"},
    ]
    path = _write(tmp_path / "a.traj.json", messages)
    with pytest.raises(TraceFormatError) as caught:
        list(read_mini_swe_agent(path))
    assert caught.value.where == "$.messages[1].role"
    reading = read_mini_swe_agent(path, skip_bad=True)
    assert [r.message["role"] for r in reading] == ["user", "assistant", "user"]
    assert [e.where for e in reading.skipped] == ["$.messages[1].role", "$.messages[3].content[1]"]


def test_missing_messages(tmp_path: Path) -> None:
    path = tmp_path / "a.traj.json"
    path.write_text(json.dumps({"info": {}}))
    with pytest.raises(TraceFormatError, match=r"\$\.messages: expected a list, got null"):
        list(read_mini_swe_agent(path))
