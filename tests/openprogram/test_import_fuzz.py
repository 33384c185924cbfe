"""Fuzzing every importer through ``import_trace``: small valid traces of each format, mutated
(odd types, deep nesting, huge numbers, lone surrogates, bad timestamps, broken lines), must
either import or fail with ``TraceFormatError`` / ``UnknownFormat``, and a failure must leave
the graph as it was."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graph import ConversationGraph
from openprogram import TraceFormatError, UnknownFormat
from openprogram.importers import FORMATS, import_trace

STAMP = "2026-01-01T10:00:00Z"
USAGE = {"input_tokens": 10, "cache_read_input_tokens": 7, "cache_creation_input_tokens": 5}
CLAUDE: list[Any] = [
    {
        "type": "user",
        "uuid": "u1",
        "sessionId": "s",
        "timestamp": STAMP,
        "message": {"role": "user", "content": "fix it"},
    },
    {
        "type": "assistant",
        "uuid": "a1",
        "timestamp": STAMP,
        "requestId": "r1",
        "message": {
            "id": "m1",
            "role": "assistant",
            "model": "claude-x",
            "content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "ok"}],
            "usage": USAGE | {"output_tokens": 1},
        },
    },
    {
        "type": "assistant",
        "uuid": "a2",
        "timestamp": STAMP,
        "message": {
            "id": "m1",
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
            ],
            "usage": USAGE | {"output_tokens": 9},
        },
    },
    {
        "type": "user",
        "uuid": "u2",
        "timestamp": STAMP,
        "toolUseResult": "a.py",
        "message": {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a.py", "is_error": False}
            ],
        },
    },
    {"type": "progress", "uuid": "p1", "data": {"x": 1}},
    {
        "type": "user",
        "uuid": "s1",
        "isSidechain": True,
        "timestamp": STAMP,
        "message": {"role": "user", "content": "side"},
    },
    {
        "type": "assistant",
        "uuid": "s2",
        "isSidechain": True,
        "message": {"id": "m2", "role": "assistant", "content": [{"type": "text", "text": "done"}]},
    },
    {
        "type": "system",
        "subtype": "compact_boundary",
        "uuid": "b1",
        "compactMetadata": {"trigger": "auto", "preTokens": 100},
    },
    {
        "type": "user",
        "uuid": "u3",
        "isCompactSummary": True,
        "message": {"role": "user", "content": "summary"},
    },
]


def _item(**payload: Any) -> dict[str, Any]:
    return {"timestamp": STAMP, "type": "response_item", "payload": payload}


CODEX: list[Any] = [
    {"timestamp": STAMP, "type": "session_meta", "payload": {"id": "sess"}},
    {"timestamp": STAMP, "type": "turn_context", "payload": {"model": "gpt-5-codex"}},
    _item(type="message", role="user", content=[{"type": "input_text", "text": "list"}]),
    _item(type="reasoning", summary=[{"type": "summary_text", "text": "think"}]),
    _item(
        type="message", role="assistant", id="i1", content=[{"type": "output_text", "text": "ok"}]
    ),
    _item(type="function_call", name="shell", arguments='{"command":["ls"]}', call_id="c1"),
    _item(type="local_shell_call", call_id="c2", action={"command": ["pwd"]}),
    _item(type="custom_tool_call", name="apply_patch", input="*** Begin", call_id="c3"),
    _item(type="function_call_output", call_id="c1", output="a.py"),
    _item(type="function_call_output", call_id="c2", output={"content": "/", "success": True}),
    _item(type="custom_tool_call_output", call_id="c3", output="Success"),
    {"timestamp": STAMP, "type": "compacted", "payload": {"message": "summary"}},
]

CALL = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"c": 1}'}}
OPENAI: list[Any] = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": [{"type": "text", "text": "go"}], "timestamp": 1767261600},
    {"role": "assistant", "content": None, "tool_calls": [CALL], "reasoning_content": "r"},
    {"role": "tool", "tool_call_id": "c1", "content": "out", "is_error": False},
    {"role": "developer", "content": "note", "created_at": STAMP},
]
SWE: dict[str, Any] = {
    "environment": "swe_main",
    "trajectory": [],
    "info": {},
    "history": [
        {"role": "system", "content": "SETTING", "agent": "primary"},
        {"role": "user", "content": "Demo", "is_demo": True},
        {"role": "user", "content": "Issue", "agent": "primary"},
        {
            "role": "assistant",
            "content": "Look.\n```\nls\n```",
            "thought": "Look.",
            "action": "ls\n",
        },
        {"role": "user", "content": "a.py"},
        {
            "role": "assistant",
            "content": "x",
            "thought": "x",
            "action": "open a.py",
            "tool_calls": [CALL],
        },
        {"role": "tool", "content": "[File]", "tool_call_ids": ["c1"]},
    ],
}
MINI: dict[str, Any] = {
    "instance_id": "astro-1",
    "info": {},
    "trajectory_format": "mini-swe-agent-1",
    "messages": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": "Run.\n```bash\nls\n```",
            "extra": {
                "response": {
                    "id": "g1",
                    "created": 1763511695,
                    "usage": {"prompt_tokens": 5},
                    "choices": [{"message": {"reasoning": "r"}}],
                }
            },
        },
        {"role": "user", "content": "<returncode>0</returncode><output>a.py</output>"},
    ],
}

TEMPLATES: list[tuple[str, str, Any]] = [
    ("claude-code", "session.jsonl", CLAUDE),
    ("codex", "rollout.jsonl", CODEX),
    ("openai", "chat.jsonl", OPENAI),
    ("openai", "chat.json", OPENAI),
    ("openai", "wrapped.json", {"id": "x", "messages": OPENAI}),
    ("swe-agent", "run.traj", SWE),
    ("mini-swe-agent", "run.traj.json", MINI),
]

RAW = [  # JSON text no Python value serializes to
    "[" * 1_200 + "]" * 1_200,
    "{" + '"a":{' * 300 + "}" * 301,
    "1e400",
    "-1e400",
    "9" * 40,
    '"\\ud800"',
    '"a\\udfffb"',
    '"\\ud800\\u0041"',
]
KEYS = [
    "role", "content", "type", "text", "tool_calls", "id", "function", "name", "arguments",
    "tool_call_id", "tool_call_ids", "timestamp", "created", "message", "payload", "messages",
    "history", "is_demo", "action", "thought", "uuid", "isSidechain", "tool_use_id", "input",
    "usage", "is_error", "subtype", "call_id", "output", "summary", "extra", "response",
]  # fmt: skip
TIMES = [
    1e20,
    -1e15,
    10**30,
    2**63,
    -(2**63),
    "9999-12-31T23:59:59-01:00",
    "0001-01-01T00:00:00+01:00",
    "2026-02-30T25:61:00",
    "",
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from(KEYS),
    st.sampled_from(TIMES),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


def _mutate(document: Any, data: st.DataObject, raws: list[str]) -> Any:
    """One change at a random place: a new value, a raw JSON fragment, or a removal."""
    path = data.draw(st.sampled_from(_paths(document)))
    kind = data.draw(st.sampled_from(["value", "raw", "delete", "add-key"]))
    if kind == "raw":
        raws.append(data.draw(st.sampled_from(RAW)))
        new: Any = f"@@RAW{len(raws) - 1}@@"
    else:
        new = data.draw(VALUES)
    if not path:
        return new if kind in ("value", "raw") else document
    parent = document
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if kind == "delete":
        del parent[last]
    elif kind == "add-key" and isinstance(parent[last], dict):
        parent[last][data.draw(st.sampled_from(KEYS))] = new
    else:
        parent[last] = new
    return document


def _serialize(file_name: str, document: Any, raws: list[str], data: st.DataObject) -> str:
    if file_name.endswith(".jsonl") and isinstance(document, list):
        lines = [json.dumps(record) for record in document]
        if lines and data.draw(st.booleans()):
            index = data.draw(st.integers(0, len(lines) - 1))
            cut = data.draw(st.integers(0, len(lines[index])))
            lines[index] = lines[index][:cut]  # a truncated or blank line
        text = "\n".join(lines) + "\n"
    else:
        text = json.dumps(document, indent=1)
    for index, raw in enumerate(raws):
        text = text.replace(f'"@@RAW{index}@@"', raw)
    return text


def _state(graph: ConversationGraph) -> tuple[Any, ...]:
    return (graph.to_openai(), len(graph), graph.last_seq, graph.store.session_meta(graph.session))


@settings(
    max_examples=120,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    template=st.sampled_from(TEMPLATES),
    mutations=st.integers(0, 4),
    skip_bad=st.booleans(),
    named=st.booleans(),
    data=st.data(),
)
def test_importers_fail_cleanly_or_import(
    template: tuple[str, str, Any],
    mutations: int,
    skip_bad: bool,
    named: bool,
    data: st.DataObject,
) -> None:
    format, file_name, original = template
    document = json.loads(json.dumps(original))
    raws: list[str] = []
    for _ in range(mutations):
        document = _mutate(document, data, raws)
    text = _serialize(file_name, document, raws, data)
    graph = ConversationGraph.memory()
    graph.append({"role": "user", "content": "earlier"})
    graph.append({"role": "assistant", "content": "", "tool_calls": [CALL]})  # pending c1
    before = _state(graph)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / file_name
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            stats = import_trace(
                path, graph, format=format if named else None, skip_bad=skip_bad, append=True
            )
        except (TraceFormatError, UnknownFormat) as error:
            assert "\n" not in str(error)
            assert _state(graph) == before
        else:
            assert stats.format in FORMATS
            assert stats.skipped == 0 or skip_bad


@settings(max_examples=60, deadline=None, database=None)
@given(
    text=st.text(max_size=200) | VALUES.map(json.dumps),
    file_name=st.sampled_from([t[1] for t in TEMPLATES]),
)
def test_arbitrary_files_fail_cleanly_or_import(text: str, file_name: str) -> None:
    graph = ConversationGraph.memory()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / file_name
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            import_trace(path, graph)
        except (TraceFormatError, UnknownFormat) as error:
            assert "\n" not in str(error)
            assert len(graph) == 0
