"""Issue 33: receipts and records written by main before the format change (fixtures from
3976c0a, see tests/fixtures/main-3976c0a/README.md) still decode, through the commands and
readers a user has; a new render over the old database writes the new fields."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from context import ContextStorage, LayerFacts, RollbackFacts, SentPrompt, read_jsonl
from graph import SQLStore
from openprogram import Session
from openprogram.cli import main
from openprogram.testing import TestModel
from openprogram.view import Viewer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "main-3976c0a"


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    db = tmp_path / "old.db"
    db.write_bytes(gzip.decompress((FIXTURES / "session.db.gz").read_bytes()))
    return db


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_old_receipts_and_records_decode_through_the_cli_and_viewer(
    old_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = _json(capsys, "records", "old", "--db", str(old_db))
    assert isinstance(records, list)
    assert [r["tier"] for r in records][-2:] == ["compact", "rollback"]
    assert all(r["render"] is None and r["clock"] is None for r in records)
    report = _json(capsys, "context", "old", "--db", str(old_db))
    assert isinstance(report, dict)
    assert report["last_sent"]["exact"] and report["receipt"]["sources"] == []
    shown = report["last_sent"]["shown"]
    assert sum(shown["parts"].values()) == report["tokens"]  # by role, without sources
    viewer = Viewer(str(old_db), None)
    calls, total = viewer.calls("old", 0, 50, kinds=True)
    drawn = [r.tier for c in calls for r in c.compactions]  # placed by time, as before
    assert total == 4 and sorted(drawn) == ["compact"] * 3 + ["microcompact"] * 2
    assert viewer.prompt("old").tokens == report["tokens"]


def test_a_new_render_over_an_old_database_writes_the_new_fields(
    old_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compact", "old", "--db", str(old_db)]) == 0
    printed = capsys.readouterr().out
    store = SQLStore(old_db, create=False)
    storage = ContextStorage(store, "old", migrate=False)
    record = storage.read_records()[-1]
    assert record.tier == "compact" and record.render and record.head and record.clock
    assert f"next prompt {record.tokens_before:,} → {record.tokens_after:,} tokens" in printed
    # sent by no call yet: the timeline shows it on none (not on the last call, as before)
    calls, _ = Viewer(str(old_db), None).calls("old", 0, 50, kinds=False)
    assert record.id not in {r.id for call in calls for r in call.compactions}
    store.close()


def test_old_jsonl_logs_read_line_by_line(tmp_path: Path) -> None:
    for name in ("session-records.jsonl", "demo-records.jsonl"):
        path = tmp_path / name
        shutil.copyfile(FIXTURES / name, path)
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        read = list(read_jsonl(path))
        assert len(read) == len(lines)
        assert [r.id for r in read] == [json.loads(line)["id"] for line in lines]
    tiers = {r.tier for r in read_jsonl(tmp_path / "demo-records.jsonl")}
    assert {"offload", "microcompact", "collapse", "snip", "compact", "rollback"} <= tiers


def test_old_records_read_as_typed_facts(tmp_path: Path) -> None:
    """Each record, old ones included, reads as its tier's facts: a compaction names its
    layer, a rollback the layers it ended (no key looked up by name)."""
    records = list(read_jsonl(FIXTURES / "demo-records.jsonl"))
    facts = [record.facts for record in records]
    assert all(f is not None for f in facts)
    made = [f.layer for f in facts if isinstance(f, LayerFacts)]
    ended = [x for f in facts if isinstance(f, RollbackFacts) for x in f.layers]
    assert made and ended and set(ended) <= set(made)
    assert {type(f).__name__ for f in facts} >= {"OffloadFacts", "SnipFacts", "CompactFacts"}


def test_a_new_call_over_an_old_database_keeps_its_sources(old_db: Path) -> None:
    """The receipt of a call made now keeps each message's source; the prompt read back
    from it has the sources the render gave (the render id restored from the receipt)."""
    session = Session(old_db, "old", model=TestModel(default="ok"), budget=3_000)
    assert session.llm("one more") == "ok"
    rendered = session.engine.last
    sent = session.last_prompt()
    assert rendered is not None and isinstance(sent, SentPrompt)
    assert sent.messages == rendered.messages and sent.id == rendered.id == sent.receipt
    assert sent.sources == rendered.sources and len(sent.sources) == len(sent.messages)
    assert sent.sources[-1].current and all(s.render == rendered.id for s in sent.sources)
    session.close()
