"""A session owns its configuration: stored at creation, used as stored on reopen, changed
only explicitly (and recorded); every prompt sent leaves a receipt that the CLI and other
processes render from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from context import ContextStorage, Policy, PolicyError
from graph import MemoryStore
from openprogram import Session
from openprogram.cli import main
from openprogram.testing import FunctionModel, ModelRequest, TestModel, tool_call

ROOT = Path(__file__).resolve().parents[2]
PAGE = "".join(f"line {i:04d}: " + "lorem ipsum dolor sit amet " * 3 + "\n" for i in range(300))


def read_page(name: str) -> str:
    """Read a page of the docs."""
    return f"{name}\n{PAGE}"


def agent(turns: int = 6) -> FunctionModel:
    """Reads a page per turn (long outputs: offload and the cascade have work), then
    answers."""

    calls: list[int] = []

    def reply(request: ModelRequest) -> Any:
        done = len(calls)
        calls.append(1)
        if done < turns:
            return {
                "role": "assistant",
                "content": f"reading page {done}",
                "tool_calls": [tool_call("read_page", {"name": f"p{done}"})],
            }
        return "done"

    return FunctionModel(reply)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- stored configuration -----------------------------------------------------------------


def test_reopening_uses_the_stored_configuration_not_the_environment(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = Policy(low_water=0.6, context_window=32_000, max_output_tokens=4_000)
    first = Session(store_url, model="gpt-4o", policy=policy, budget=500, max_steps=7)
    first.close()
    monkeypatch.setenv("OPENPROGRAM_LOW_WATER", "0.5")
    monkeypatch.setenv("OPENPROGRAM_CONTEXT_WINDOW", "64000")
    again = Session(store_url, first.id)
    assert again.engine.budget == 500
    assert again.policy == policy and again.policy.low_water == 0.6
    assert again.max_steps == 7 and again.config.model == "gpt-4o"
    assert getattr(again.model, "name", None) == "gpt-4o"  # given by name: reopened by name
    assert ContextStorage(again.store, again.id).configurations() == []  # nothing changed
    # The environment counts when a session is made.
    fresh = Session(store_url)
    assert fresh.policy.low_water == 0.5 and fresh.policy.context_window == 64_000
    for session in (again, fresh):
        session.close()


def test_a_memory_store_keeps_the_configuration_for_its_sessions() -> None:
    store = MemoryStore()
    first = Session(store, model=TestModel(), budget=800)
    assert Session(store, first.id).engine.budget == 800


def test_an_explicit_change_is_stored_and_recorded(store_url: str) -> None:
    session = Session(store_url, model=TestModel(), budget=900)
    assert session.configure(budget=900) == {}  # the same: nothing to record
    changed = session.configure(budget=1_200, low_water=0.5)
    assert changed == {"budget": 1_200, "policy": {"low_water": 0.5}}
    assert session.engine.budget == 1_200 and session.policy.low_water == 0.5
    reopened = Session(store_url, session.id, budget=1_500)  # an argument: explicit too
    assert reopened.engine.budget == 1_500
    again = Session(store_url, session.id)
    assert again.engine.budget == 1_500 and again.policy.low_water == 0.5
    events = ContextStorage(again.store, again.id).configurations()
    assert [e["changes"] for e in events] == [changed, {"budget": 1_500}]
    assert [e["epoch"] for e in events] == [1, 2]
    with pytest.raises(PolicyError, match="unknown policy setting"):
        session.configure(no_such_setting=1)
    session.configure(model="gpt-3.5-turbo")  # a model the map knows: its window too
    assert session.policy.context_window == 16_385 and session.config.model == "gpt-3.5-turbo"
    for each in (session, reopened, again):
        each.close()


def test_a_configuration_change_starts_new_tier_state(tmp_path: Path) -> None:
    session = Session(tmp_path / "a.db", model=agent(), budget=3_000)
    session.llm("read the pages", tools=[read_page])
    assert session.engine._state_key == "e0"
    session.configure(budget=2_500)
    assert session.engine._state_key == "e1"
    keys = session.store.get_values(session.id, "context.state")
    assert any(k.startswith("e0:") for k in keys)
    session.engine.render()
    keys = session.store.get_values(session.id, "context.state")
    assert any(k.startswith("e1:") for k in keys)
    session.close()


def test_a_receipt_names_the_epoch_its_render_was_decided_under(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    session = Session(db, model=agent(), budget=3_000)
    session.llm("read the pages", tools=[read_page])
    assert (receipt := session.receipt()) is not None and receipt.epoch == 0
    session.configure(budget=2_500)
    session.engine.render()
    assert (receipt := session.receipt()) is not None and receipt.epoch == 1
    other = Session(db, session.id)  # another process starts a new epoch...
    other.configure(budget=2_000)
    session.engine.render()  # ...which an engine that has not followed it does not use
    assert (receipt := session.receipt()) is not None and receipt.epoch == 1
    session.llm("and once more")  # a call follows the stored configuration first
    assert (receipt := session.receipt()) is not None and receipt.epoch == 2
    assert session.engine._state_key == "e2"
    other.close()
    session.close()


def test_configure_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "c.db")
    session = Session(db, model=TestModel(), budget=900)
    session.close()
    code, out, _ = run(capsys, "--db", db, "configure", session.id, "--json")
    assert code == 0 and json.loads(out)["changed"] == {}
    code, out, _ = run(
        capsys, "--db", db, "configure", session.id, "--budget", "700", "--set", "low_water=0.6"
    )
    assert code == 0 and "changed budget, policy (recorded)" in out
    again = Session(db, session.id)
    assert again.engine.budget == 700 and again.policy.low_water == 0.6
    code, _, err = run(capsys, "--db", db, "configure", session.id, "--set", "nope=1")
    assert code == 1 and "unknown policy setting" in err and len(err.strip().splitlines()) == 1
    again.close()


# -- render receipts ------------------------------------------------------------------------


def test_context_json_reports_the_last_receipt(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = Session(store_url, model=agent(), budget=2_500, system="You read docs.")
    assert session.receipt() is None
    assert session.llm("read the pages", tools=[read_page]) == "done"
    receipt = session.receipt()
    assert receipt is not None and receipt.tool_tokens > 0
    assert receipt.budget == 2_500 and receipt.head is not None
    receipts = ContextStorage(session.store, session.id).receipts()
    assert len(receipts) == 7 and receipts[-1] == receipt  # one per LLM call
    session.close()
    args = ["--db", store_url, "--state-dir", str(session.folder.path), "context", session.id]
    code, out, _ = run(capsys, *args, "--json")
    assert code == 0
    shown = json.loads(out)
    assert shown["source"] == "receipt" and shown["what_if"] == []
    assert (shown["budget"], shown["tokens"]) == (receipt.budget, receipt.tokens)
    assert shown["next"]["tokens"] > shown["tokens"]  # the answer came after it
    code, out, _ = run(capsys, *args)
    assert code == 0 and "last prompt" in out and f"{receipt.tokens:,}" in out
    # A what-if is marked as such, and says what it changed.
    code, out, _ = run(capsys, *args, "--budget", "900", "--json")
    what_if = json.loads(out)
    assert what_if["source"] == "what-if" and what_if["what_if"] == ["--budget"]
    assert what_if["budget"] == 900
    code, out, _ = run(capsys, *args, "--budget", "900")
    assert "WHAT-IF" in out and "--budget" in out


def test_a_second_process_renders_what_the_agent_sent(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    session = Session(db, model=agent(), budget=2_500, system="You read docs.")
    session.llm("read the pages", tools=[read_page])
    receipt = session.receipt()
    assert receipt is not None
    session.close()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from openprogram.cli import run; run()",
            "--db",
            str(db),
            "context",
            session.id,
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=True,
    ).stdout
    shown = json.loads(out)
    assert (shown["budget"], shown["tokens"]) == (receipt.budget, receipt.tokens)
    assert shown["receipt"]["id"] == receipt.id
    # A reopened session renders with the tools of the last prompt, under its budget.
    reopened = Session(db, session.id)
    assert reopened.engine.budget == 2_500
    names = [t["function"]["name"] for t in reopened.engine.tools]
    assert names[0] == "read_page" and "read_output" in names
    again = reopened.last_prompt()  # what a notebook shows: the prompt sent last
    assert again is not None and (again.tokens, again.budget) == (receipt.tokens, receipt.budget)
    assert reopened.engine.preview().tokens > again.tokens  # the next one holds the answer
    reopened.close()


def test_the_redaction_setting_is_stored_with_the_session(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    key = "sk-ant-api03-" + "a" * 40
    first = Session(db, model=TestModel(), redact=True)
    first.close()
    again = Session(db, first.id)  # no redact= given: the stored setting applies
    assert again.config.redact and again.graph.redactor is not None
    node = again.graph.append({"role": "user", "content": f"my key is {key}"})
    assert key not in str(again.graph.get(node.id).payload)
    again.close()


def test_a_receipt_after_an_overflow_holds_the_squeezed_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overflow = ValueError("prompt is too long: 210000 tokens > 200000 maximum")
    model = TestModel([overflow, "fits now"])
    session = Session(tmp_path / "o.db", model=model, system="sys", budget=3_000)
    for n in range(6):
        session.graph.append({"role": "user", "content": f"question {n} " + "word " * 150})
        session.graph.append({"role": "assistant", "content": f"answer {n} " + "word " * 150})
    assert session.llm("last question") == "fits now"
    first, second = ContextStorage(session.store, session.id).receipts()
    assert first.budget == 3_000 and second.budget < 3_000  # what the retry was sent under
    assert second.configured_budget == 3_000 and second.tokens <= second.budget
    assert session.receipt() == second
    session.close()
    code, out, _ = run(capsys, "--db", str(tmp_path / "o.db"), "context", session.id, "--json")
    shown = json.loads(out)
    assert code == 0 and (shown["budget"], shown["tokens"]) == (second.budget, second.tokens)


def test_a_running_session_follows_a_change_made_elsewhere(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    running = Session(store_url, model=TestModel(default="ok"), budget=3_000)
    running.llm("first")
    assert main(["--db", store_url, "configure", running.id, "--budget", "2000"]) == 0
    capsys.readouterr()
    running.llm("second")  # the next call runs as now stored
    receipt = running.receipt()
    assert running.engine.budget == 2_000 and receipt is not None and receipt.budget == 2_000
    assert running.engine._state_key == "e1"
    running.close()


def test_reopening_with_another_known_model_is_an_explicit_change(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    first = Session(db, model=TestModel())
    assert first.policy.context_window == 128_000
    again = Session(db, first.id, model="gpt-3.5-turbo")
    assert again.policy.context_window == 16_385 and again.config.model == "gpt-3.5-turbo"
    [event] = ContextStorage(again.store, again.id).configurations()
    assert event["changes"]["policy"]["model"] == "gpt-3.5-turbo"
    assert Session(db, first.id).policy.context_window == 16_385  # stored
