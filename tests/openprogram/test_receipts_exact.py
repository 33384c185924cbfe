"""Every receipt keeps the prompt exactly as sent (issue 22): across compactions and a
rollback each call's receipt reads back the messages the model received in that call, while
rendering it again from its head no longer gives them; the messages are stored once per
session and digest, so storage grows with unique messages, not calls × messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _runtime_helpers import append_read_rounds

from context import ContextStorage, canonical_message, render_receipt, sent_prompt
from graph import SQLStore
from openprogram import Session
from openprogram.cli import main
from openprogram.testing import TestModel

MESSAGES = "context.messages"  # the side data the sent messages are stored in, by digest


def _demo_like(db: Path) -> tuple[Session, TestModel]:
    model = TestModel(default="ok")
    session = Session(db, "s1", model=model, system="Fix.", budget=4_000)
    for step in range(6):
        append_read_rounds(session, step * 6, 6)
        assert session.llm(f"go on {step}") == "ok"
        assert session.llm("and check") == "ok"
    active = session.graph.layers(active=True)
    assert active, "the budget should have made the cascade compact"
    session.engine.rollback(active[0].id, reason="test")
    assert session.llm("after the rollback") == "ok"
    return session, model


def test_every_receipt_reads_back_what_the_model_received(tmp_path: Path) -> None:
    session, model = _demo_like(tmp_path / "a.db")
    storage = ContextStorage(session.graph.store, "s1", migrate=False)
    receipts = storage.receipts()
    assert len(receipts) == len(model.requests) == 13
    rendered_otherwise = 0
    for receipt, request in zip(receipts, model.requests, strict=True):
        sent = sent_prompt(storage, receipt)
        assert sent is not None and sent.messages == request.messages
        assert (sent.tokens, len(sent.messages)) == (receipt.tokens, receipt.messages)
        assert sent.tools == request.tools and sent.receipt == receipt.id
        again = render_receipt(session.engine, receipt)
        rendered_otherwise += again.messages != request.messages
    assert rendered_otherwise > 0  # what a view showed before: not what was sent
    last = session.last_prompt()
    assert last is not None and last.messages == model.requests[-1].messages
    session.close()


def test_messages_are_stored_once_per_session(tmp_path: Path) -> None:
    session, model = _demo_like(tmp_path / "a.db")
    sent = sum(len(request.messages) for request in model.requests)
    unique = {canonical_message(m) for request in model.requests for m in request.messages}
    stored = SQLStore(tmp_path / "a.db", create=False).get_values("s1", MESSAGES)
    assert set(stored.values()) == unique
    # 86 of 255 under the budget by our count; under the budget the test model's usage
    # used to loosen (issue 32), prompts were longer and shared more: under a third then.
    assert len(stored) < sent / 2, (len(stored), sent)
    session.close()


def test_a_rolled_back_transaction_leaves_no_digest_known_but_missing(tmp_path: Path) -> None:
    """A digest written in a transaction that rolls back must be written again next time."""
    session = Session(tmp_path / "a.db", "s1", model=TestModel(default="ok"), system="Hi.")
    storage = session.engine.storage
    assert storage is not None
    message = {"d1": '{"content":"x","role":"user"}'}
    try:
        with session.graph.store.transaction():
            storage._save_messages(message)
            raise RuntimeError("rolled back")
    except RuntimeError:
        pass
    assert storage.messages(["d1"]) == {}
    storage._save_messages(message)
    assert storage.messages(["d1"]) == message
    session.close()


def test_a_long_sessions_receipts_store_what_changed_and_read_back_what_was_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Over a long history each receipt stores the changes since a whole one (issue 35):
    every receipt still reads back, in this process and in another, the prompt the model
    received, and the stored receipts stay small while the prompts grow."""
    db = tmp_path / "a.db"
    model = TestModel(default="ok")
    session = Session(db, "s1", model=model, system="Be brief.", budget=200_000)
    for n in range(300):
        session.graph.append({"role": "user", "content": f"question {n}"})
        session.graph.append({"role": "assistant", "content": f"answer {n}"})
    for n in range(45):
        assert session.llm(f"and {n}?") == "ok"
    session.close()
    reopened = Session(db, "s1", model=TestModel(default="ok"))
    storage = ContextStorage(reopened.graph.store, "s1", migrate=False)
    receipts = storage.receipts()
    assert len(receipts) == len(model.requests) == 45
    for receipt, request in zip(receipts, model.requests, strict=True):
        sent = sent_prompt(storage, receipt)
        assert sent is not None and sent.messages == request.messages
        assert len(receipt.sources) == len(request.messages) == receipt.messages
    last = reopened.last_prompt()
    assert last is not None and last.messages == model.requests[-1].messages
    logged = SQLStore(db, create=False).read_log("s1", "context.receipts")
    assert sum(len(e.body) for e in logged) < 45 * 20_000  # each whole one is over 60,000
    reopened.close()
    assert main(["--db", str(db), "context", "s1", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["last_sent"]
    assert shown["sent"] == model.requests[-1].messages and shown["exact"] is True
