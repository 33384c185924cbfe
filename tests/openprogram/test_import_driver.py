"""``import_trace``: traces into a ``ConversationGraph``, with markers, side chains and repairs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from _runtime_helpers import refuse_appending

from graph import ConversationGraph, Dialogue, Function, Tool
from openprogram import SessionError, TraceFormatError
from openprogram.importers import IMPORTED_KEY, ImportStats, import_trace


def _jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def _cc(rtype: str, uuid: str, sidechain: bool = False, **fields: Any) -> dict[str, Any]:
    base = {"type": rtype, "uuid": uuid, "sessionId": "cc-1", "isSidechain": sidechain}
    return base | {"timestamp": "2026-01-01T10:00:00Z"} | fields


def _said(
    role: str, content: Any, uuid: str, sidechain: bool = False, **more: Any
) -> dict[str, Any]:
    message = {"role": role, "content": content} | more
    return _cc(role, uuid, sidechain, message=message)


def _call(call_id: str, name: str = "Task") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


SESSION = [
    _said("user", "Review the branch", "u1"),
    _said(
        "assistant",
        [{"type": "tool_use", "id": "t1", "name": "Task", "input": {}}],
        "a1",
        id="m1",
        model="claude-test",
    ),
    _said("user", "Review it", "s1", sidechain=True),
    _said("assistant", [{"type": "text", "text": "Looks fine."}], "s2", sidechain=True, id="m2"),
    _said("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "fine"}], "u2"),
    _cc("system", "b1", subtype="compact_boundary", compactMetadata={"trigger": "manual"}),
    _cc("user", "u3", isCompactSummary=True, message={"role": "user", "content": "Summary."}),
    _said("assistant", [{"type": "text", "text": "Merged."}], "a2", id="m3"),
]


def test_claude_code_session_into_graph(tmp_path: Path) -> None:
    graph = ConversationGraph.memory()
    stats = import_trace(_jsonl(tmp_path / "cc.jsonl", SESSION), graph)
    assert stats == ImportStats(
        session_id="cc-1",
        format="claude-code",
        messages=8,
        tool_calls=1,
        unanswered=0,
        functions=1,
        skipped=0,
        warnings=[],
    )
    nodes = graph.nodes()
    kinds = [(n.kind, n.role) for n in nodes]
    assert kinds == [
        ("dialogue", "user"),
        ("dialogue", "assistant"),
        ("tool", None),
        ("function", None),
        ("dialogue", "user"),
        ("dialogue", "assistant"),
        ("dialogue", "system"),
        ("dialogue", "user"),
        ("dialogue", "assistant"),
    ]
    tool, function = nodes[2], nodes[3]
    assert isinstance(tool.payload, Tool) and tool.result is not None
    assert tool.result.content == "fine"
    assert function.payload == Function(name="sidechain", input=None, expose="hidden")
    assert function.output == "Looks fine."
    assert [n.id for n in graph.children(function.id)] == [nodes[4].id, nodes[5].id]
    assert nodes[6].meta["native_compaction"] == "boundary"
    assert nodes[7].meta == {"uuid": "u3", "native_compaction": "summary"}
    assert nodes[1].meta["model"] == "claude-test"
    assert str(nodes[0].at) == "2026-01-01 10:00:00+00:00"


def _chat(tmp_path: Path, messages: list[Any]) -> Path:
    return _jsonl(tmp_path / "chat.jsonl", messages)


def test_orphan_tool_result_gets_a_synthetic_call(tmp_path: Path) -> None:
    graph = ConversationGraph.memory()
    path = _chat(
        tmp_path,
        [
            {"role": "user", "content": "go"},
            {"role": "tool", "tool_call_id": "lost", "content": "output"},
        ],
    )
    stats = import_trace(path, graph)
    assert stats.messages == 3 and stats.tool_calls == 1 and stats.unanswered == 0
    assert stats.warnings == ["tool result 'lost' answers no earlier call; added a synthetic call"]
    repair, tool = graph.nodes()[1:3]
    assert repair.payload == Dialogue(role="assistant", content="")
    assert repair.meta == {"synthetic": "orphan_tool_result"}
    assert tool.payload == Tool(name="unknown", arguments="{}", call_id="lost")
    assert tool.result is not None and tool.result.content == "output"


def test_unanswered_call_stays_pending(tmp_path: Path) -> None:
    graph = ConversationGraph.memory()
    path = _chat(tmp_path, [{"role": "assistant", "content": "", "tool_calls": [_call("c1")]}])
    stats = import_trace(path, graph)
    assert (stats.tool_calls, stats.unanswered, stats.warnings) == (1, 1, [])
    assert graph.nodes()[1].status == "pending"


def test_call_id_reused_while_pending_is_renamed(tmp_path: Path) -> None:
    graph = ConversationGraph.memory()
    calls = [{"role": "assistant", "content": "", "tool_calls": [_call("c1")]}] * 2
    results = [{"role": "tool", "tool_call_id": "c1", "content": str(n)} for n in (1, 2)]
    stats = import_trace(_chat(tmp_path, calls + results), graph)
    assert stats.unanswered == 0
    assert stats.warnings == ["call id 'c1' used twice; the later call is stored as 'c1~2'"]
    tools = [n for n in graph.nodes() if n.kind == "tool"]
    answered = [
        (t.payload.call_id, t.result.content)
        for t in tools
        if isinstance(t.payload, Tool) and t.result is not None
    ]
    assert answered == [("c1", "1"), ("c1~2", "2")]


def test_malformed_trace_raises_before_touching_the_graph(tmp_path: Path) -> None:
    graph = ConversationGraph.memory()
    path = _chat(tmp_path, [{"role": "user", "content": "hi"}, "{broken"])
    with pytest.raises(TraceFormatError, match="line 2"):
        import_trace(path, graph)
    assert len(graph) == 0


def test_skip_bad_and_explicit_format(tmp_path: Path) -> None:
    graph = ConversationGraph.memory()
    path = _jsonl(tmp_path / "chat.txt", [{"role": "user", "content": "hi"}, "{broken"])
    stats = import_trace(path, graph, format="openai", skip_bad=True)
    assert (stats.format, stats.messages, stats.skipped) == ("openai", 1, 1)
    assert graph.to_openai() == [{"role": "user", "content": "hi"}]


def test_call_id_reused_after_its_result_is_renamed(tmp_path: Path) -> None:
    graph = ConversationGraph.memory()
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "first"},
        {"role": "assistant", "content": "", "tool_calls": [_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "second"},
    ]
    stats = import_trace(_chat(tmp_path, messages), graph)
    ids = [c["id"] for m in graph.to_openai() for c in m.get("tool_calls") or []]
    assert ids == ["c1", "c1~2"]
    answers = [m["content"] for m in graph.to_openai() if m["role"] == "tool"]
    assert answers == ["first", "second"]
    assert stats.warnings == ["call id 'c1' used twice; the later call is stored as 'c1~2'"]


def test_the_same_trace_twice_into_one_session_is_imported_once(
    tmp_path: Path, store_url: str
) -> None:
    path = _chat(
        tmp_path, [{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"}]
    )
    graph = ConversationGraph.open(store_url, session="s")
    first = import_trace(path, graph)
    assert (first.messages, first.already_imported) == (2, False)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    entry = {"file": "chat.jsonl", "format": "openai", "records": 2}
    stored = graph.store.session_meta("s")[IMPORTED_KEY][digest]
    assert {key: stored[key] for key in entry} == entry and len(stored["chain"]) == 64

    again = ConversationGraph.open(store_url, session="s")
    second = import_trace(path, again)
    assert (second.messages, second.already_imported) == (0, True)
    assert len(ConversationGraph.open(store_url, session="s")) == 2

    other = _jsonl(tmp_path / "other.jsonl", [{"role": "user", "content": "more"}])
    with pytest.raises(SessionError, match="already holds another conversation"):
        import_trace(other, again)
    third = import_trace(other, again, append=True)
    assert (third.messages, third.already_imported) == (1, False)
    reread = ConversationGraph.open(store_url, session="s")
    assert [m["content"] for m in reread.to_openai()] == ["go", "ok", "more"]
    assert len(reread.store.session_meta("s")[IMPORTED_KEY]) == 2
    assert import_trace(path, ConversationGraph.open(store_url, session="t")).messages == 2


def test_a_record_the_graph_refuses_is_a_trace_error_and_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _chat(tmp_path, [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    db = f"sqlite:///{tmp_path}/op.db"
    graph = ConversationGraph.open(db, session="s")
    refuse_appending(monkeypatch, "b")
    with pytest.raises(TraceFormatError) as caught:
        import_trace(path, graph)
    assert caught.value.where == "record 2 (after parsing)"
    assert "not b" in str(caught.value) and "\n" not in str(caught.value)
    reread = ConversationGraph.open(db, session="s")
    assert len(reread) == 0 and reread.store.session_meta("s") == {}
    assert len(graph) == 0 and graph.head is None
