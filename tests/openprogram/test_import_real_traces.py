"""Every shared real trace imports cleanly: parses, has messages, and pairs its tool calls.

The traces live outside the repository (``../shared/traces``); without them these tests skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from graph import ConversationGraph
from openprogram.importers import detect_format, import_trace, read_trace

TRACES = Path(__file__).parents[2].parent / "shared" / "traces"
FOLDERS = ["claude-code", "mini-swe-agent", "swe-agent"]  # each folder is named after its format


def _traces(folder: str) -> list[Path]:
    directory = TRACES / folder
    if not directory.is_dir():
        pytest.skip(f"no shared traces at {directory}")
    found = sorted(p for p in directory.iterdir() if p.is_file() and "LICENSE" not in p.name)
    assert found, f"{directory} holds no traces"
    return found


@pytest.mark.parametrize("folder", FOLDERS)
def test_real_traces_parse_with_valid_tool_pairing(folder: str) -> None:
    for path in _traces(folder):
        assert detect_format(path) == folder, path
        reading = read_trace(path)
        records = list(reading)
        assert records, path
        assert reading.skipped == [], path
        called: set[str] = set()
        for record in records:
            message = record.message
            called.update(call["id"] for call in message.get("tool_calls", ()))
            if message["role"] == "tool":
                assert message["tool_call_id"] in called, (path, message["tool_call_id"])
            assert isinstance(message["content"], str), path


@pytest.mark.parametrize("folder", FOLDERS)
def test_real_traces_import_into_a_graph(folder: str) -> None:
    for path in _traces(folder):
        graph = ConversationGraph.memory()
        stats = import_trace(path, graph)
        assert stats.messages > 0 and stats.skipped == 0, path
        # One SWE-agent demo reuses a call id for a later call: renamed, and said so.
        odd = [w for w in stats.warnings if "used twice; the later call is stored as" not in w]
        assert odd == [], (path, stats.warnings)
        history = graph.to_openai()
        assert len(history) > 0, path
        ids = [call["id"] for message in history for call in message.get("tool_calls") or []]
        assert len(ids) == len(set(ids)), path
