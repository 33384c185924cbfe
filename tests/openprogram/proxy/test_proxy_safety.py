"""Fail open, never leak: an engine fault sends the client's request unchanged with a
record; the provider key is in no database, state folder or log; usage is kept per
receipt, and the viewer lists proxy sessions as the ordinary sessions they are."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from context import ContextEngine, ContextStorage
from graph import SQLStore
from openprogram import Session
from openprogram.cli import main
from tests.openprogram._browser import served

KEY = "sk-ant-api03-NEVER-STORE-ME-0123456789abcdefghijklmnop"
TOOLS = [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}]


@pytest.fixture
def claude(running: Any) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=running.anthropic_base, api_key=KEY, max_retries=0) as c:
        yield c


def test_an_engine_fault_sends_the_request_unchanged_with_a_record(
    running: Any, claude: anthropic.Anthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("injected engine fault")

    monkeypatch.setattr(ContextEngine, "render", broken)
    messages: list[Any] = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
        }
    ]
    reply = claude.messages.create(
        model="claude-sonnet-4-5", max_tokens=8, tools=TOOLS, messages=messages
    )  # type: ignore[arg-type]
    assert reply.content[0].text == "ok, done"  # type: ignore[union-attr]
    with openai.OpenAI(base_url=running.openai_base, api_key=KEY, max_retries=0) as gpt:
        gpt.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    sent = [s.body for s in running.upstream.seen]
    assert sent[0] == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 8,
        "tools": TOOLS,
        "messages": messages,
    }
    assert sent[1] == {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    records = running.proxy.records()
    assert [r["event"] for r in records] == ["fail-open", "fail-open"]
    assert all(r["reason"] == "RuntimeError: injected engine fault" for r in records)


def test_a_body_that_is_not_json_goes_on_as_it_came(running: Any) -> None:
    import httpx

    answer = httpx.post(running.anthropic_base + "/v1/messages", content=b"{not json",
                        headers={"x-api-key": KEY, "content-type": "application/json"})  # fmt: skip
    assert answer.status_code == 500  # the upstream's own answer to it, passed back
    (record,) = running.proxy.records()
    assert record["event"] == "fail-open" and "DecodeError" in record["reason"]


def _everything_written(db: Path, caplog: pytest.LogCaptureFixture) -> list[tuple[str, bytes]]:
    found = [(str(db), db.read_bytes())]
    for path in db.parent.rglob("*"):
        if path.is_file():
            found.append((str(path), path.read_bytes()))
    found.append(("logs", "\n".join(r.getMessage() for r in caplog.records).encode()))
    return found


def test_the_key_is_never_stored_or_logged(
    running: Any, claude: anthropic.Anthropic, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    history: list[Any] = [{"role": "user", "content": "start"}]
    for n in range(12):  # enough to compact (summaries, records, offload files)
        claude.messages.create(
            model="claude-sonnet-4-5", max_tokens=8, tools=TOOLS, messages=history
        )  # type: ignore[arg-type]
        history += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": "ls"}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "file\n" * 900}]}]  # fmt: skip
    assert any(r["tokens"] and r["tokens"] > 1000 for r in running.proxy.records())
    assert any(KEY in v for v in running.upstream.seen[-1].headers.values())  # it went on
    written = _everything_written(running.db, caplog)
    assert len(written) > 3
    leaks = [name for name, data in written if KEY.encode() in data or KEY[-20:].encode() in data]
    assert leaks == []


def test_usage_is_kept_per_receipt_and_the_viewer_lists_the_session(
    running: Any, claude: anthropic.Anthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    claude.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=8,
        tools=TOOLS,
        messages=[{"role": "user", "content": "a"}],
    )
    claude.messages.create(model="claude-sonnet-4-5", max_tokens=8, tools=TOOLS,
                           messages=[{"role": "user", "content": "a"}, {"role": "assistant", "content": "ok, done"},
                                     {"role": "user", "content": "b"}])  # fmt: skip
    (info,) = running.proxy.store.sessions()
    capsys.readouterr()
    assert main(["sessions", "--db", str(running.db), "--json"]) == 0
    assert [row["id"] for row in json.loads(capsys.readouterr().out)] == [info.id]
    with served(running.db) as fetch:  # `openprogram view` lists it, its calls on its page
        status, listing, _ = fetch("/")
        assert status == 200 and f"/s/{info.id}" in listing
    stored = SQLStore(running.db, create=False, read_only=True)
    receipts = ContextStorage(stored, info.id).receipts()
    stored.close()
    usage = running.proxy.usage(info.id)
    assert len(receipts) == 2 and set(usage) == {r.id for r in receipts}
    sent = running.upstream.bodies()
    assert [usage[r.id]["input"] for r in receipts] == [
        max(1, len(json.dumps(b)) // 4) for b in sent
    ]
    assert all(u["cache_read"] == 7 for u in usage.values())
    with Session(str(running.db), info.id) as again:  # an ordinary session: the last prompt as sent
        prompt = again.last_prompt()
        assert prompt is not None and prompt.messages[-1]["content"] == "b"


def test_a_history_of_thousands_of_messages_is_rendered_not_failed_open(
    running: Any, claude: anthropic.Anthropic
) -> None:
    # The mirror walked a history recursively, one frame per message: past ~1,000 it hit
    # Python's recursion limit and every request failed open.
    history: list[Any] = [{"role": "user", "content": "go"}]
    for n in range(800):
        history += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "ok"}]}]  # fmt: skip
    claude.messages.create(model="claude-sonnet-4-5", max_tokens=8, tools=TOOLS, messages=history)  # type: ignore[arg-type]
    claude.messages.create(model="claude-sonnet-4-5", max_tokens=8, tools=TOOLS, messages=history)  # type: ignore[arg-type]
    assert [r["event"] for r in running.proxy.records()] == ["sent", "sent"]


def test_records_are_whole_lines_appended_from_any_thread(tmp_path: Path) -> None:
    """Each record is one line appended with one write (from the threads that prepare and
    finish requests at once), its text as it is (not escaped), the time first."""
    import threading

    from openprogram.proxy import Proxy, ProxyConfig

    proxy = Proxy(ProxyConfig(db=str(tmp_path / "p.db")))
    try:

        def write(n: int) -> None:
            for m in range(50):
                proxy.record({"event": "note", "reason": f"résumé {n}-{m}", "long": "x" * 5000})

        threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        lines = proxy.log.read_text(encoding="utf-8").splitlines()
        assert len(lines) == 200 and all(line.startswith('{"at": "') for line in lines)
        assert sum("résumé" in line for line in lines) == 200
        records = proxy.records()
        assert sorted(r["reason"] for r in records) == sorted(
            f"résumé {n}-{m}" for n in range(4) for m in range(50)
        )
    finally:
        proxy.close()
