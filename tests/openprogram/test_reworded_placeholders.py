"""Issue 33: what a prompt message is comes from the source its render gave it, never from
its wording. Every placeholder, note and layer banner is reworded (the wording functions
wrapped), and the bench's ``--losses`` table, the viewer's kinds and sources and
``context --json``'s parts stay exactly what they were.

Tokens are counted by length here (no encoding loaded: ``ceil(len / 4)``) and each
rewording keeps its length, so every decision the cascade takes is the same in both runs:
only the words differ, which is the point."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _runtime_helpers import append_read_rounds

# internal: the wording functions a quality change would reword, and the encoding loader
# (made to fail, so counts go by length and an equal-length rewording changes no decision)
from context._budget import _tokens
from context._render import _backlog
from context._tiers import _collapse, _compact, _emergency, _microcompact, _offload, _rereads, _snip
from graph import seeded_ids
from openprogram import Session
from openprogram.cli import main
from openprogram.testing import TestModel
from openprogram.view import Viewer

SWAPS = {
    "Context Compaction": "Prior Work Summary",
    "offloaded": "relocated",
    "superseded": "overridden",
    "summarized": "abstracted",
    "Collapsed": "Condensed",
    "cleared": "emptied",
    "removed": "dropped",
    "elided": "hidden",
}
WORDING: list[tuple[Any, str]] = [
    (_offload, "placeholder"),
    (_microcompact, "cleared_text"),
    (_rereads, "note"),
    (_collapse, "banner"),
    (_compact, "compaction_text"),
    (_backlog, "compaction_text"),
    (_snip, "note_text"),
    (_emergency, "stub_text"),
]


def _swap(text: str) -> str:
    for old, new in SWAPS.items():
        assert len(old) == len(new)
        text = text.replace(old, new)
    return text


def _reworded(original: Callable[..., str]) -> Callable[..., str]:
    return lambda *args, **kwargs: _swap(original(*args, **kwargs))


@pytest.fixture(autouse=True)
def by_length(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_tokens, "_load", lambda name: None)


def _reword(monkeypatch: pytest.MonkeyPatch) -> None:
    for module, name in WORDING:
        monkeypatch.setattr(module, name, _reworded(getattr(module, name)))


def _session(db: Path) -> str:
    with seeded_ids("reworded"):
        session = Session(db, "s", model=TestModel(default="ok"), system="Fix.", budget=3_000)
        for step in range(4):
            append_read_rounds(session, step * 6, 6)
            assert session.llm(f"go on {step}") == "ok"
        session.close()
    return "s"


def _what_consumers_say(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[str, Any], list[str]]:
    db = folder / "a.db"
    session = _session(db)
    capsys.readouterr()
    assert main(["context", session, "--db", str(db), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    viewer = Viewer(str(db), None)
    prompt = viewer.prompt(session)
    texts = [row.text for row in prompt.rows]
    said = {
        "parts": report["last_sent"]["shown"]["parts"],
        "tokens": report["tokens"],
        "kinds": prompt.by_kind,
        "rows": [
            (row.role, row.kind, row.tokens, row.node is None, row.layer is None)
            for row in prompt.rows
        ],
        "said": [row.source.split(" ")[0] for row in prompt.rows],
    }
    return said, texts


def _losses(folder: Path, capsys: pytest.CaptureFixture[str]) -> str:
    lines = []
    for i in range(10):
        names = "\n".join(f"helper_{i}_{k} = module_{i}.value_{k}" for k in range(600))
        call = {"id": f"c{i}", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}
        lines += [
            {"role": "assistant", "content": f"step {i}", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": names},
            {"role": "assistant", "content": f"now use helper_{i}_300 from module_{i}.value_300"},
        ]
    path = folder / "chat.jsonl"
    messages = [{"role": "user", "content": "task: x"}, *lines]
    path.write_text("".join(json.dumps(m) + "\n" for m in messages))
    capsys.readouterr()
    args = ["bench", str(path), "--losses", "none", "--policies", "claude-code,progressive"]
    assert main([*args, "--budget", "8000"]) == 0
    return capsys.readouterr().out


def test_rewording_every_placeholder_changes_nothing_a_consumer_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "reworded").mkdir()
    plain, plain_texts = _what_consumers_say(tmp_path / "plain", capsys)
    plain_losses = _losses(tmp_path / "plain", capsys)
    _reword(monkeypatch)
    again, texts = _what_consumers_say(tmp_path / "reworded", capsys)
    losses = _losses(tmp_path / "reworded", capsys)
    assert texts != plain_texts  # the words did change...
    assert any(new in text for text in texts for new in SWAPS.values())
    assert not any(old in text for text in texts for old in ("offloaded", "Context Compaction"))
    assert again == plain  # ...and nothing a consumer says did
    assert "summaries (layers)" in plain["parts"]
    assert losses == plain_losses
    assert "tool output cleared" in plain_losses or "tool output offloaded" in plain_losses, (
        plain_losses
    )
