"""Redaction as a property over the whole public write surface, stated per setting.

Whatever a session is given — messages (content, names, meta), tool calls and results,
function inputs, outputs and errors, layers, an LLM's replies and its tools' outputs, huge
outputs that get offloaded — and whatever the cascade then does with it (render, collapse,
compact):

* default setting (redact before summaries): a planted key never appears in a summarizer
  request, a summary, a compaction record (database, JSONL, callback) or an export;
* ``redact=True``: nor anywhere in the database or the state folder.

Run on SQLite and PostgreSQL.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from context import ContextError, HeuristicSummarizer, SummaryRequest, SummaryResult
from graph import ConversationGraph
from openprogram import Session
from openprogram.testing import TestModel, tool_call

KEYS = (
    "sk-ant-api03-Zx8Lq2Wm5Np9Rt4Yv7Bc1Df6Gh3Jk0Mn-_QpRsTuVwXyZaB",
    "sk-proj-Q7vX2mKp9LrT4wYz8NbC1dFh6JsA3eGu5iOq0VyRkWtM",
    "ghp_R4nD0mL00k1ngT0k3nV4lu3F0rT3st1ngAb",
    "AKIAQ3EGUMZ7XK2LPN5W",
    "xoxb-271828182845-9045235360287-AbCdEfGhIjKlMnOp",
)
SEPARATORS = (" ", "\n", "=", ": ", '"', "(", "\t")


class Capturing:
    """The heuristic summarizer, keeping every request it was sent (as JSON)."""

    name = "heuristic"

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.inner = HeuristicSummarizer()

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        seen = {
            "messages": request.messages,
            "nodes": {k: msgspec.to_builtins(v) for k, v in request.nodes.items()},
            "task": request.task,
            "system": request.system,
            "previous": None if request.previous is None else request.previous.text(),
        }
        self.sent.append(json.dumps(seen, default=str))
        return self.inner.summarize(request)


def _write(op: str, s: Session, leak: str) -> None:
    """One way of handing ``leak`` (a key with text around it) to the session."""
    g = s.graph
    if op == "user":
        g.append({"role": "user", "content": f"use {leak}"}, meta={"origin": leak})
    elif op == "assistant":
        g.append({"role": "assistant", "content": f"I will use {leak}", "name": "bot"})
    elif op == "tool":
        cid = f"c{uuid.uuid4().hex[:8]}"
        call = {"id": cid, "type": "function", "function": {"name": "Bash", "arguments": ""}}
        call["function"]["arguments"] = json.dumps({"command": f"echo {leak}"})
        g.append({"role": "assistant", "content": None, "tool_calls": [call]})
        g.append({"role": "tool", "tool_call_id": cid, "content": f"printed {leak}"})
    elif op == "huge":
        cid = f"h{uuid.uuid4().hex[:8]}"
        call = {"id": cid, "type": "function", "function": {"name": "Read", "arguments": "{}"}}
        g.append({"role": "assistant", "content": None, "tool_calls": [call]})
        g.append({"role": "tool", "tool_call_id": cid, "content": f"{leak}\n" + "y " * 20_000})
    elif op == "function":
        with g.function("fetch", input={"token": leak}, meta={"why": leak}) as fn:
            g.append({"role": "assistant", "content": "fetched"})
            fn.output = {"echo": leak}
    elif op == "failure":
        with pytest.raises(RuntimeError), g.function("deploy"):
            raise RuntimeError(f"401 Unauthorized {leak}")
    elif op == "layer":
        first = g.nodes()[-1].id
        note = [{"role": "user", "content": f"note about {leak}"}]
        g.add_layer("note", [first], note, meta={"k": leak})
    elif op == "llm":

        def lookup(query: str) -> str:
            """Look something up."""
            raise PermissionError(f"denied for {leak}")

        script = [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [tool_call("lookup", {"query": leak})],
            },
            f"The answer mentions {leak}",
        ]
        s.llm(f"find {leak}", tools=[lookup], model=TestModel(script))


OPS = ("user", "assistant", "tool", "huge", "function", "failure", "layer", "llm")


def _fill(s: Session, count: int) -> None:
    for i in range(count):
        s.graph.append({"role": "user", "content": f"go on with part {i}"})
        s.graph.append({"role": "assistant", "content": f"Part {i} done. " + "note " * 60})


def _exercise(s: Session, ops: list[str], leak: str) -> list[str]:
    """Write through every op, then let the cascade summarize; returns what callbacks saw."""
    seen: list[str] = []
    s.engine.callbacks.append(lambda record: seen.append(json.dumps(msgspec.to_builtins(record))))
    s.graph.append({"role": "user", "content": "Task: rotate the credentials"})
    for op in ops:
        _write(op, s, leak)
        _fill(s, 1)
    _fill(s, 4)
    s.engine.render()
    with contextlib.suppress(ContextError):  # the render compacted all there was already
        s.engine.compact()
    s.engine.render()
    return seen


def _export(db: str, session: str, out: Path) -> str:
    from openprogram.cli import main

    texts = []
    for form in ("openai", "json", "graphml"):
        target = out / f"{session}.{form}"
        assert main(["--db", db, "export", session, str(target), "--format", form]) == 0
        texts.append(target.read_text())
    return "\n".join(texts)


def _summaries(g: ConversationGraph) -> str:
    """Every summary the session's layers carry (and the whole text of collapse layers)."""
    parts = []
    for info in g.layers():
        parts.append(json.dumps(info.layer.meta.get("summary")))
        if info.kind == "collapse":
            parts.append(json.dumps(info.layer.replacement))
    return "\n".join(parts)


def _stored_bytes(url: str, folder: Path) -> bytes:
    """What the database holds: the SQLite files, or every row of PostgreSQL's tables."""
    if url.startswith("sqlite"):
        path = Path(url.removeprefix("sqlite:///"))
        return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            tables = connection.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            ).scalars()
            rows = [
                str(row)
                for table in list(tables)
                for row in connection.execute(text(f'SELECT CAST(t AS text) FROM "{table}" t'))
            ]
    finally:
        engine.dispose()
    return "\n".join(rows).encode()


def _folder_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())


leaks = st.builds(
    lambda key, before, after: f"{before}{key}{after}",
    st.sampled_from(KEYS),
    st.sampled_from(SEPARATORS),
    st.sampled_from(SEPARATORS),
)
op_lists = st.lists(st.sampled_from(OPS), min_size=1, max_size=4)


def _property(store_url: str, tmp_path: Path, redact: bool) -> Callable[[list[str], str], None]:
    state = tmp_path / "state"
    exports = tmp_path / "exports"
    exports.mkdir(exist_ok=True)

    def check(ops: list[str], leak: str) -> None:
        key = next(k for k in KEYS if k in leak)
        capture = Capturing()
        sid = f"p{uuid.uuid4().hex[:10]}"
        s = Session(
            store_url,
            sid,
            state_dir=state,
            budget=6_000,
            summarizer=capture,
            redact=redact,
            model=TestModel(["ok"]),
        )
        try:
            seen = _exercise(s, ops, leak)
            assert capture.sent, "the cascade never asked for a summary"
            for request in capture.sent:
                assert key not in request
            assert key not in _summaries(s.graph)
            assert all(key not in record for record in seen)
            assert key not in json.dumps([msgspec.to_builtins(r) for r in s.engine.records()])
            log = state / "records" / f"{sid}.jsonl"
            assert key not in (log.read_text() if log.exists() else "")
            assert key not in _export(store_url, sid, exports)
            stored = key.encode() in _stored_bytes(store_url, state)
            filed = key.encode() in _folder_bytes(state)
            if redact:
                assert not stored and not filed
            else:
                assert stored  # only when asked: the default keeps what it was given
        finally:
            s.close()

    return check


@pytest.mark.parametrize("redact", [False, True], ids=["default", "redact"])
def test_a_planted_key_never_leaks_past_what_the_setting_promises(
    store_url: str, tmp_path: Path, redact: bool
) -> None:
    check = _property(store_url, tmp_path, redact)
    examples = 6 if store_url.startswith("sqlite") else 3

    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(ops=op_lists, leak=leaks)
    def run(ops: list[str], leak: str) -> None:
        check(ops, leak)

    run()
