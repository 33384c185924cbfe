"""One program through each adapter into two databases sends byte-identical requests
(issue 34, item 2): node and session ids are random ULIDs that differ between the two, and
prompts name what they point at by handles (``n42``, ``L3``) derived from the session's
own sequence. The framework-made ids (the fake provider's tool-call ids, the frameworks'
own run and message ids) come from ``uuid.uuid4``, made deterministic here."""

from __future__ import annotations

import importlib.util
import itertools
import json
import re
import uuid
from pathlib import Path

import pytest
from _fake_provider import FakeProvider
from _wire import RUNNERS, session_for

FRAMEWORKS = {"pydantic_ai": "pydantic_ai", "langchain": "langchain", "openai_agents": "agents"}
ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def _sent(framework: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The wire JSON (messages and tools) of every request one run sent."""
    made = itertools.count(1)
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=(n := next(made)) << 64 | n))
    folder.mkdir()
    fake = FakeProvider()
    session = session_for(folder, 7_000)
    try:
        RUNNERS[framework](fake, session, steps=16, history=1, anchor=False)
        bodies = [{k: r.body.get(k) for k in ("messages", "tools")} for r in fake.requests]
    finally:
        session.close()
        fake.close()
    return [json.dumps(body, ensure_ascii=False, separators=(",", ":")) for body in bodies]


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_one_program_into_two_databases_sends_identical_requests(
    framework: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if importlib.util.find_spec(FRAMEWORKS[framework]) is None:
        pytest.skip(f"{FRAMEWORKS[framework]} is not installed")
    _sent(framework, tmp_path / "warm", monkeypatch)  # a framework's once-a-process ids
    first = _sent(framework, tmp_path / "a", monkeypatch)
    second = _sent(framework, tmp_path / "b", monkeypatch)
    assert len(first) > 16 and first == second
    shown = "".join(first)
    assert 'expand_layer(\\"L1\\")' in shown and 'read_output(\\"n' in shown
    assert not ULID.search(shown)
