"""A steady render of a long session asks the database only what this process cannot know
(issue 35): what other writers stored since it last looked, before deciding and again under
the commit's lock, then writes its receipt. No configuration epoch (the engine renders under
the one it was built with), no lock statement where SQLite's ``BEGIN IMMEDIATE`` holds the
database already, no savepoint for the receipt inside the commit's transaction, no lookup
of the messages and tools it has seen stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy

from graph import SQLStore
from openprogram import Session
from openprogram.testing import TestModel


def test_a_steady_render_reads_only_what_other_writers_may_have_changed(tmp_path: Path) -> None:
    session = Session(tmp_path / "s.db", model=TestModel(default="ok"), budget=60_000)
    for n in range(200):
        session.graph.append({"role": "user", "content": f"question {n}"})
        session.graph.append({"role": "assistant", "content": f"answer {n}"})
    engine = session.engine
    engine.render()
    engine.render()  # what the first receipt stored is known from here on
    assert isinstance(session.store, SQLStore)
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(" ".join(statement.split()))

    sqlalchemy.event.listen(session.store.engine, "before_cursor_execute", record)
    try:
        rendered = engine.render()
    finally:
        sqlalchemy.event.remove(session.store.engine, "before_cursor_execute", record)
    assert len(rendered.messages) == 400
    reads = [s for s in seen if s.startswith("SELECT")]
    assert len(reads) == 2, reads  # the catch-up, then the same under the commit's lock
    assert all(s.startswith("SELECT next_seq, head") for s in reads), reads
    writes = [s for s in seen if s.startswith("INSERT")]
    assert [w.split()[2] for w in writes] == ["graph_logs", "graph_values"]  # the receipt
    assert sum(s.startswith("BEGIN") for s in seen) == 2
    assert not [s for s in seen if "SAVEPOINT" in s]  # the receipt is in the commit's own
    receipt = session.receipt()
    assert receipt is not None and receipt.render == rendered.id and receipt.epoch == 0
    session.close()
