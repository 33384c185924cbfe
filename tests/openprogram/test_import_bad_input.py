"""Hostile input to every importer: deep nesting and out-of-range timestamps give one clear
``TraceFormatError`` naming the file and line (or are skipped and counted), never a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from graph import ConversationGraph
from openprogram import TraceFormatError, UnknownFormat
from openprogram.cli import main
from openprogram.importers import import_trace

DEEP = 1_500  # past msgspec's own limit (RecursionError before the fix)
BEYOND_CAP = 300  # decodes, but deeper than the importers read

Record = Callable[[Any, Any], dict[str, Any]]


def _deep_text(levels: int) -> str:
    """JSON for ``levels`` nested lists, built as text (json.dumps itself would recurse)."""
    return "[" * levels + '"x"' + "]" * levels


def _claude(content: Any, stamp: Any) -> dict[str, Any]:
    message = {"role": "user", "content": content}
    return {"type": "user", "uuid": "u", "timestamp": stamp, "message": message}


def _codex(content: Any, stamp: Any) -> dict[str, Any]:
    payload = {"type": "message", "role": "user", "content": content}
    return {"timestamp": stamp, "type": "response_item", "payload": payload}


def _openai(content: Any, stamp: Any) -> dict[str, Any]:
    return {"role": "user", "content": content, "timestamp": stamp}


JSONL: dict[str, Record] = {"claude-code": _claude, "codex": _codex, "openai": _openai}
GOOD_STAMP = "2026-01-01T10:00:00Z"
BAD_STAMPS = [1e20, -1e15, 10**30, "9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"]


def _jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _good(record: Record) -> str:
    return json.dumps(record("fine", GOOD_STAMP))


def _deep_line(record: Record, levels: int) -> str:
    return json.dumps(record("PLACEHOLDER", GOOD_STAMP)).replace(
        '"PLACEHOLDER"', _deep_text(levels)
    )


@pytest.mark.parametrize("levels", [DEEP, BEYOND_CAP])
@pytest.mark.parametrize("name", sorted(JSONL))
def test_a_deep_jsonl_record_names_its_line_or_is_skipped(
    tmp_path: Path, name: str, levels: int
) -> None:
    record = JSONL[name]
    path = _jsonl(tmp_path / "t.jsonl", [_good(record), _deep_line(record, levels), _good(record)])
    graph = ConversationGraph.memory()
    with pytest.raises(TraceFormatError) as caught:
        import_trace(path, graph)
    assert (caught.value.path, caught.value.where) == (str(path), "line 2")
    assert "nested deeper than 200 levels" in str(caught.value)
    assert len(graph) == 0
    stats = import_trace(path, graph, skip_bad=True)
    assert (stats.format, stats.messages, stats.skipped) == (name, 2, 1)


@pytest.mark.parametrize("name", sorted(JSONL))
def test_a_deep_first_line_does_not_hide_the_format(tmp_path: Path, name: str) -> None:
    record = JSONL[name]
    path = _jsonl(tmp_path / "t.jsonl", [_deep_line(record, DEEP), _good(record)])
    stats = import_trace(path, ConversationGraph.memory(), skip_bad=True)
    assert (stats.format, stats.messages, stats.skipped) == (name, 1, 1)
    with pytest.raises(TraceFormatError, match=r"t\.jsonl:line 1: JSON nested deeper"):
        import_trace(path, ConversationGraph.memory())


def _documents(levels: int) -> dict[str, tuple[str, str]]:
    """Whole-document traces (file name, text) whose third line holds the deep value."""
    deep = _deep_text(levels)
    openai = '[\n{"role": "user", "content": "a"},\n{"role": "user", "content": ' + deep + "}\n]"
    swe = '{"history": [\n{"role": "user", "content": "a"},\n{"role": "user", "x": ' + deep + "}]}"
    mini = '{"instance_id": "i", "messages": [\n{"role": "user",\n"content": ' + deep + "}]}"
    return {
        "openai": ("chat.json", openai),
        "swe-agent": ("run.traj", swe),
        "mini-swe-agent": ("run.traj.json", mini),
    }


@pytest.mark.parametrize("levels", [DEEP, BEYOND_CAP])
@pytest.mark.parametrize("name", ["openai", "swe-agent", "mini-swe-agent"])
def test_a_deep_document_names_the_line(tmp_path: Path, name: str, levels: int) -> None:
    file_name, text = _documents(levels)[name]
    path = tmp_path / file_name
    path.write_text(text)
    for skip_bad in (False, True):
        with pytest.raises(TraceFormatError) as caught:
            import_trace(path, ConversationGraph.memory(), skip_bad=skip_bad)
        assert (caught.value.path, caught.value.where) == (str(path), "line 3")
        assert "\n" not in str(caught.value)


@pytest.mark.parametrize("stamp", BAD_STAMPS, ids=repr)
@pytest.mark.parametrize("name", sorted(JSONL))
def test_an_out_of_range_timestamp_names_its_line(tmp_path: Path, name: str, stamp: Any) -> None:
    record = JSONL[name]
    path = _jsonl(tmp_path / "t.jsonl", [_good(record), json.dumps(record("late", stamp))])
    graph = ConversationGraph.memory()
    with pytest.raises(TraceFormatError) as caught:
        import_trace(path, graph)
    assert caught.value.where.startswith("line 2, $.timestamp")
    assert "out of range" in caught.value.problem
    assert len(graph) == 0
    stats = import_trace(path, graph, skip_bad=True)
    assert (stats.messages, stats.skipped) == (1, 1)


@pytest.mark.parametrize("stamp", BAD_STAMPS[:3], ids=repr)
def test_an_out_of_range_mini_swe_agent_time_names_its_path(tmp_path: Path, stamp: Any) -> None:
    response = {"created": stamp, "choices": []}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "hm", "extra": {"response": response}},
    ]
    path = tmp_path / "run.traj.json"
    path.write_text(json.dumps({"instance_id": "i", "messages": messages}))
    with pytest.raises(TraceFormatError) as caught:
        import_trace(path, ConversationGraph.memory())
    assert caught.value.where == "$.messages[1].extra.response.created"
    stats = import_trace(path, ConversationGraph.memory(), skip_bad=True)
    assert (stats.messages, stats.skipped) == (1, 1)


def test_the_cli_reports_deep_json_in_one_line_and_skips_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _jsonl(tmp_path / "deep.jsonl", [_good(_claude), _deep_line(_claude, DEEP)])
    db = str(tmp_path / "op.db")
    assert main(["--db", db, "import", str(path)]) == 1
    out = capsys.readouterr().err
    assert "deep.jsonl:line 2: JSON nested deeper than 200 levels" in out
    assert "Traceback" not in out
    assert main(["--db", db, "import", str(path), "--skip-bad"]) == 0
    assert "skipped 1" in capsys.readouterr().out


def test_unhashable_type_fields_are_not_a_crash(tmp_path: Path) -> None:
    """A list or object where a type name belongs used to raise TypeError (unhashable)."""
    claude = _jsonl(tmp_path / "cc.jsonl", ['{"type": ["user"], "message": {}}'])
    with pytest.raises(UnknownFormat, match="cannot tell which trace format"):
        import_trace(claude, ConversationGraph.memory())
    codex = _jsonl(tmp_path / "codex.jsonl", [_good(_codex), '{"type": {"a": 1}, "payload": {}}'])
    stats = import_trace(codex, ConversationGraph.memory())
    assert (stats.messages, stats.warnings) == (1, ["ignored record type {'a': 1}"])
    chat = _jsonl(tmp_path / "chat.jsonl", ['{"role": "user", "content": [{"type": ["image"]}]}'])
    graph = ConversationGraph.memory()
    import_trace(chat, graph)
    assert graph.to_openai() == [{"role": "user", "content": "[['image']]"}]
