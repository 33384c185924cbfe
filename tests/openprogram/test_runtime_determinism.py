"""What the model is shown is a function of the history and the policy: two databases
holding one history, each asked the same next question, send the same prompt, the ids of
the layers made for it included (random ids tokenized differently, so the same run made
different decisions)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from _runtime_helpers import long_session, small_policy

from graph import seeded_ids
from openprogram import Session
from openprogram.testing import TestModel


def _next_prompt(folder: Path) -> tuple[list[dict[str, Any]], set[str]]:
    db = f"sqlite:///{folder}/op.db"
    with seeded_ids("one history"):  # the history's node ids are its own, fixed here
        first = long_session(folder, db, rounds=30, budget=6_000)
        session_id = first.id
        first.close()
    model = TestModel(default="ok")
    session = Session(
        db, model=model, budget=2_500, policy=small_policy(folder), session_id=session_id
    )
    before = {info.id for info in session.engine.layers()}
    assert session.llm("What did you find?") == "ok"
    made = {info.id for info in session.engine.layers()} - before
    session.close()
    return model.requests[0].messages, made


def test_one_history_in_two_databases_sends_identical_prompts(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, made = _next_prompt(tmp_path / "a")
    second, _ = _next_prompt(tmp_path / "b")
    assert made and re.search(r'"L\d+"', str(first))  # made now, shown by its handle
    assert not any(layer in str(first) for layer in made)  # never by its id
    assert first == second
