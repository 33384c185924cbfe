"""`openprogram context` after a rollback (issue 22, item 10): the last prompt is the one
its receipt recorded, exactly as the model received it, the prompt the head renders now is
the next one, each labelled, and the MCP ``context`` tool reports the same two. A receipt
written before messages were kept is rendered again, and shown only while that matches."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import msgspec
import pytest
from _runtime_helpers import append_read_rounds
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from context import ContextStorage, SentPrompt
from graph import SQLStore
from openprogram import Session
from openprogram.cli import main
from openprogram.testing import TestModel

RECEIPTS = "context.receipts"  # the side data receipts are stored in (the stored format)

ROOT = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _sent_then_rolled_back(db: Path, capsys: pytest.CaptureFixture[str]) -> TestModel:
    model = TestModel(default="ok")
    session = Session(db, "s1", model=model, system="Fix.", budget=4_000)
    append_read_rounds(session, 0, 30)
    assert session.llm("go on") == "ok"
    session.close()
    code, out, _ = run(capsys, "--db", str(db), "collapses", "s1", "--json")
    layers = [layer["id"] for layer in json.loads(out) if layer["active"]]
    assert code == 0 and layers
    assert run(capsys, "--db", str(db), "rollback", "s1", layers[0])[0] == 0
    return model


def _mcp_context(db: Path) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "import sys; from openprogram.cli import run; sys.argv[0] = 'openprogram'; run()"
    params = StdioServerParameters(
        command=sys.executable, args=["-c", code, "mcp", "--db", str(db)], env=env,
        cwd=str(db.parent),
    )  # fmt: skip

    async def call() -> str:
        async with Client(params, raise_exceptions=True) as client:
            result = await client.call_tool("context", {"session": "s1"})
            assert not result.is_error, result.content
            return "".join(getattr(part, "text", "") for part in result.content)

    found: dict[str, object] = json.loads(asyncio.run(call()))
    return found


def test_after_a_rollback_the_last_prompt_is_the_receipts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "a.db"
    model = _sent_then_rolled_back(db, capsys)
    receipt = ContextStorage(SQLStore(db, create=False), "s1").last_receipt()
    assert receipt is not None
    code, out, _ = run(capsys, "--db", str(db), "context", "s1", "--json")
    shown = json.loads(out)
    assert code == 0 and shown["source"] == "receipt"
    last = shown["last_sent"]
    assert (last["tokens"], last["messages"]) == (receipt.tokens, receipt.messages)
    assert (shown["tokens"], shown["messages"]) == (receipt.tokens, receipt.messages)
    # the head renders otherwise now, but the last prompt is read back exactly as sent
    assert last["exact"] is True and last["sent"] == model.requests[-1].messages
    assert (last["shown"]["tokens"], last["shown"]["messages"]) == (
        receipt.tokens,
        receipt.messages,
    )
    upcoming = shown["next"]
    assert (upcoming["tokens"], upcoming["messages"]) != (receipt.tokens, receipt.messages)
    code, out, _ = run(capsys, "--db", str(db), "context", "s1")
    assert code == 0
    sent = next(line for line in out.splitlines() if line.startswith("last prompt sent"))
    assert f"{receipt.tokens:,} of {receipt.budget:,} tokens, {receipt.messages} messages" in sent
    assert f"next prompt of s1: {upcoming['tokens']:,} of" in " ".join(out.split())
    assert "last prompt, exactly as sent" in " ".join(out.split())
    served = _mcp_context(db)
    assert served["last_sent"] == last and served["next"] == upcoming


def test_before_any_rollback_the_last_prompt_is_shown_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "a.db"
    session = Session(db, "s1", model=TestModel(default="ok"), system="Be brief.")
    assert session.llm("hello") == "ok"
    session.close()
    code, out, _ = run(capsys, "--db", str(db), "context", "s1", "--json")
    shown = json.loads(out)
    last = shown["last_sent"]
    assert code == 0 and last["shown"] is not None and last["shown"]["tokens"] == last["tokens"]
    assert shown["next"]["messages"] == last["messages"] + 1  # the answer came after it


def test_a_receipt_without_messages_is_rendered_again_while_that_matches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Receipts written before messages were kept (no digests) still decode and still
    show: rendered again while that matches the receipt, the receipt's figures after."""
    db = tmp_path / "a.db"
    _sent_then_rolled_back(db, capsys)
    storage = ContextStorage(SQLStore(db, create=False), "s1")
    receipt = storage.last_receipt()
    assert receipt is not None and receipt.message_digests
    old = json.loads(msgspec.json.encode(receipt))
    del old["message_digests"]
    text = json.dumps(old)
    storage.store.put_values("s1", RECEIPTS, {"~last": text, receipt.frame or "-": text})
    code, out, _ = run(capsys, "--db", str(db), "context", "s1", "--json")
    last = json.loads(out)["last_sent"]
    assert code == 0 and last["exact"] is False and "sent" not in last
    assert last["shown"] is None  # after the rollback its head renders otherwise: never sent
    assert (last["tokens"], last["messages"]) == (receipt.tokens, receipt.messages)
    reopened = Session(db, "s1", model=TestModel(default="ok"))
    again = reopened.last_prompt()
    assert again is not None and not isinstance(again, SentPrompt)
    reopened.close()
