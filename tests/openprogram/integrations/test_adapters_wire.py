"""Each adapter under its framework's own agent run, counted on the wire: a long history,
then one user request the agent works on for 40 tool steps on its own, every request sent
over HTTP by the framework's OpenAI-compatible code to a local server. Counted with cl100k
over the JSON the server received (messages, the instructions among them, tool schemas),
no request is over the 7,000-token budget and every one holds the current user request
verbatim; with and without the provider's reported input tokens anchoring the counts (the
server reports what it received, counted the same way)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from _fake_provider import FakeProvider
from _wire import HISTORY, REQUEST, RUNNERS, Run, session_for, wire_tokens

from openprogram.cli import main as cli

BUDGET = 7_000
STEPS = 40
FRAMEWORKS = {"pydantic_ai": "pydantic_ai", "langchain": "langchain", "openai_agents": "agents"}


def _run(framework: str, tmp_path: Path, fake: FakeProvider, anchor: bool) -> tuple[Run, int]:
    """The run, and how many reported input tokens anchored its counts."""
    if importlib.util.find_spec(FRAMEWORKS[framework]) is None:
        pytest.skip(f"{FRAMEWORKS[framework]} is not installed")
    session = session_for(tmp_path, BUDGET)
    try:
        run = RUNNERS[framework](fake, session, steps=STEPS, anchor=anchor)
        return run, session.engine.anchor.reports
    finally:
        session.close()


@pytest.mark.parametrize("anchor", [False, True], ids=["unanchored", "anchored"])
@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_a_long_autonomous_run_stays_in_budget_on_the_wire(
    framework: str, anchor: bool, tmp_path: Path, fake_provider: FakeProvider
) -> None:
    run, anchored = _run(framework, tmp_path, fake_provider, anchor)
    assert anchored == (len(run.calls) if anchor else 0)
    assert len(run.calls) == len(HISTORY) * 7 + STEPS + 1
    assert max(c.wire for c in run.calls) > BUDGET * 0.8  # the budget was what held it
    assert [c.wire for c in run.over] == []
    assert [c.request for c in run.lost] == []
    assert all(c.request == REQUEST for c in run.calls[-STEPS - 1 :])
    assert all(c.ours >= c.wire for c in run.calls) or anchor  # counted as sent, or over


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_tool_schemas_are_counted_as_the_framework_sends_them(
    framework: str, tmp_path: Path, fake_provider: FakeProvider
) -> None:
    session = session_for(tmp_path, 50_000)
    if importlib.util.find_spec(FRAMEWORKS[framework]) is None:
        pytest.skip(f"{FRAMEWORKS[framework]} is not installed")
    try:
        RUNNERS[framework](fake_provider, session, steps=2, history=0, anchor=False)
        sent = fake_provider.requests[-1].body["tools"]
        assert session.engine.tools == sent  # strict flags, empty descriptions and all
        assert session.engine.tool_tokens >= wire_tokens({"tools": sent})
    finally:
        session.close()


def test_openprogram_context_counts_an_adapter_session_as_it_was_sent(
    tmp_path: Path, fake_provider: FakeProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    if importlib.util.find_spec("pydantic_ai") is None:
        pytest.skip("pydantic_ai is not installed")
    session = session_for(tmp_path, 50_000)
    try:
        run = RUNNERS["pydantic_ai"](fake_provider, session, steps=3, history=0, anchor=False)
    finally:
        session.close()
    capsys.readouterr()
    assert cli(["--db", str(tmp_path / "op.db"), "context", session.id, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    last = run.calls[-1]
    assert report["last_sent"]["tokens"] == last.ours and report["last_sent"]["exact"]
    assert report["next"]["tokens"] > last.ours >= last.wire  # the answer since, as sent
