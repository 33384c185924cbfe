"""A rollback through ``Session.llm`` with the default preset: the next request holds the
layer's original messages verbatim, even after a sticky snip dropped its summary."""

from __future__ import annotations

import json
import re
from pathlib import Path

from openprogram import Session, node_text
from openprogram.testing import TestModel

REMOVED = re.compile(r"\[\d+ earlier round\(s\) were removed")


def _grow(session: Session, rounds: int, *, tool: str = "lookup", first: int = 0) -> None:
    for i in range(first, first + rounds):
        call = {"id": f"c{i}", "type": "function", "function": {"name": tool, "arguments": "{}"}}
        session.graph.append({"role": "user", "content": f"look at part {i}"})
        session.graph.append(
            {"role": "assistant", "content": f"reading part_{i}.py", "tool_calls": [call]}
        )
        session.graph.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"fn_{i}\n" * 60})


def test_a_rollback_after_a_snip_sends_the_originals(tmp_path: Path) -> None:
    model = TestModel(default="ok")
    session = Session(tmp_path / "op.db", "s1", model=model, system="Fix.", budget=6_000)
    _grow(session, 30)
    assert session.llm("go on") == "ok"
    compaction = next(i for i in session.graph.layers() if i.kind == "compact")
    originals = [t for n in compaction.covers if (t := node_text(session.graph.get(n)))]
    assert "look at part 1" in originals

    session.engine.budget = 700
    assert session.llm("briefly") == "ok"
    assert REMOVED.search(json.dumps(model.requests[-1].messages))

    session.engine.budget = 40_000
    session.engine.rollback(compaction.id)
    assert session.llm("anything else?") == "ok"
    sent = model.requests[-1].messages
    contents = [m.get("content") for m in sent]
    assert [t for t in originals if t not in contents] == []
    assert not REMOVED.search(json.dumps(sent))
    session.close()


def test_outputs_cleared_after_the_layer_come_back_whole(tmp_path: Path) -> None:
    """A microcompact firing after the compaction cleared the outputs it hid by ordinal: the
    rollback shows them whole (until microcompact fires again)."""
    model = TestModel(default="ok")
    session = Session(tmp_path / "op.db", "s1", model=model, system="Fix.", budget=6_000)
    _grow(session, 12, tool="Read")
    compaction = session.engine.compact()
    _grow(session, 68, tool="Read", first=12)
    assert session.llm("go on") == "ok"
    assert "microcompact" in {r.tier for r in session.engine.records()}

    session.engine.budget = 200_000
    session.engine.rollback(compaction.id)
    assert session.llm("more") == "ok"
    contents = [m.get("content") for m in model.requests[-1].messages]
    outputs = [f"fn_{i}\n" * 60 for i in range(1, 12)]
    assert [o for o in outputs if o not in contents] == []
    session.close()
