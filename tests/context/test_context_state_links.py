"""The state folder against hardlinks and FIFOs, for every store (memory, SQLite,
PostgreSQL), each in its default folder: a file there with a second name (the user's
``.env`` linked in) is refused, never appended to, offered or scrubbed through; a FIFO in
place of the marker or a file is refused at once, never waited on."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _context_helpers import policy, start, tool_round

import graph
from context import (
    ContextEngine,
    ScrubRefused,
    StateDirError,
    read_jsonl,
    release_state_folder,
    scrub_session,
    state_folder,
)
from graph import ConversationGraph, MemoryStore, SQLStore, Store

MARKER = ".openprogram-database"  # the marker file that claims a state folder (on disk)
SECRET = "OPENAI_API_KEY=sk-live-Q9x7-do-not-touch"
ENV = f"{SECRET}\n".encode()
BIG = "".join(f"row {i:05d} " + "v" * 50 + "\n" for i in range(250))  # 15,000 chars


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Store]:
    monkeypatch.setenv("OPENPROGRAM_STATE_HOME", str(tmp_path / "home"))
    found: Store
    if request.param == "memory":
        found = MemoryStore()
    elif request.param == "sqlite":
        found = SQLStore(tmp_path / "op.db")
    else:
        found = SQLStore(request.getfixturevalue("pg_db_url"))
    try:
        yield found
    finally:
        if isinstance(found, MemoryStore):
            release_state_folder(found)
        graph.dispose_engines()


@pytest.fixture
def env(tmp_path: Path) -> Path:
    """The user's ``.env``, outside the state folder, holding a key."""
    path = tmp_path / "project" / ".env"
    path.parent.mkdir()
    path.write_bytes(ENV)
    return path


def folder_of(store: Store) -> Path:
    """The store's default state folder (made, as an attacker would find it)."""
    path = state_folder(store).path
    path.mkdir(parents=True, exist_ok=True)
    return path


def link(env: Path, where: Path) -> None:
    """Plant ``where`` as a second name of ``env`` (same file system, or skip)."""
    where.parent.mkdir(parents=True, exist_ok=True)
    where.unlink(missing_ok=True)
    try:
        os.link(env, where)
    except OSError as error:  # another file system: no hardlink can be planted there
        pytest.skip(f"cannot hardlink {env} into {where.parent}: {error}")


def session_with_output(store: Store, output: str = BIG) -> tuple[ConversationGraph, str]:
    g = ConversationGraph(store, "s")
    start(g)
    node = tool_round(g, [("Read", output)], prefix="c")
    g.append({"role": "assistant", "content": "read it"})
    return g, g.tools(node.id)[0].id


def engine(g: ConversationGraph, tmp_path: Path) -> ContextEngine:
    return ContextEngine(g, policy(tmp_path), budget=100_000)


# -- hardlinks ------------------------------------------------------------------------------


def test_a_render_never_appends_to_a_hardlinked_records_log(
    store: Store, env: Path, tmp_path: Path
) -> None:
    g, _ = session_with_output(store)
    log = folder_of(store) / "records" / "s.jsonl"
    link(env, log)
    e = engine(g, tmp_path)
    rendered = e.render()
    [record] = rendered.records
    [problem] = [a.error for a in rendered.actions if a.tier == "records"]
    assert "1 record(s) not in the JSONL log" in problem and "2 links" in problem
    assert env.read_bytes() == ENV and os.stat(env).st_nlink == 2
    assert e.records() == [record]  # the database copy is written anyway
    log.unlink()  # the link removed: the next render writes the owed line, to a file of ours
    e.render()
    assert list(read_jsonl(log)) == [record] and env.read_bytes() == ENV


def test_a_hardlinked_offload_file_is_refused_not_offered(
    store: Store, env: Path, tmp_path: Path
) -> None:
    g, tool_id = session_with_output(store)
    planted = folder_of(store) / "tool_results" / "s" / f"{tool_id}.txt"
    link(env, planted)
    rendered = engine(g, tmp_path).render()
    [record] = [r for r in rendered.records if r.tier == "offload"]
    assert record.error and tool_id in record.error and "2 links" in record.error
    assert record.offloaded == []  # the prompt never sends the agent to read the .env
    assert "output offloaded" not in str(rendered.messages)
    assert env.read_bytes() == ENV and planted.read_bytes() == ENV


def test_scrub_refuses_hardlinked_files_and_scrubs_the_rest(
    store: Store, env: Path, tmp_path: Path
) -> None:
    g, tool_id = session_with_output(store, f"{SECRET}\n{BIG}")
    e = engine(g, tmp_path)
    e.render()
    e.close()
    folder = folder_of(store)
    offloaded = folder / "tool_results" / "s" / f"{tool_id}.txt"
    assert SECRET in offloaded.read_text()
    link(env, offloaded)
    link(env, folder / "records" / "s.jsonl")
    with pytest.raises(ScrubRefused, match="has 3 links") as refused:
        scrub_session(store, "s", {"key": "sk-live-Q9x7"})
    assert len(refused.value.refused) == 2
    assert env.read_bytes() == ENV and os.stat(env).st_nlink == 3  # never zeroed or renamed
    assert refused.value.report.rows  # the rows were scrubbed all the same
    assert SECRET not in str(ConversationGraph(store, "s").to_openai())


# -- FIFOs ----------------------------------------------------------------------------------


class Hung(BaseException):
    """Raised by the alarm: no ``except OSError`` on the way may swallow it."""


def within_a_minute(call: Callable[[], Any], fifo: Path) -> Any:
    """``call()``, failing (not hanging) if it blocks on ``fifo``; the main thread's alarm
    interrupts a blocked ``open``, and a writer opened on the FIFO frees one elsewhere."""
    assert threading.current_thread() is threading.main_thread()

    def hung(*_: object) -> None:
        with_writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(with_writer)
        raise Hung(f"blocked on {fifo}")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        return call()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_fifo_marker_is_refused_at_once(store: Store, tmp_path: Path) -> None:
    g, _ = session_with_output(store)
    marker = folder_of(store) / MARKER
    os.mkfifo(marker)
    with pytest.raises(StateDirError, match="is not a regular file") as refused:
        within_a_minute(lambda: state_folder(store), marker)
    assert str(marker) in str(refused.value) and "\n" not in str(refused.value)
    for opening in (lambda: engine(g, tmp_path), lambda: scrub_session(store, "s", {"k": "x"})):
        with pytest.raises(StateDirError, match="is not a regular file"):
            within_a_minute(opening, marker)


@pytest.mark.parametrize("where", ["records", "tool_results"])
def test_a_fifo_file_is_refused_not_waited_on(store: Store, tmp_path: Path, where: str) -> None:
    g, tool_id = session_with_output(store, f"{SECRET}\n{BIG}")
    folder = folder_of(store)
    fifo = (
        folder / "records" / "s.jsonl"
        if where == "records"
        else folder / "tool_results" / "s" / f"{tool_id}.txt"
    )
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    rendered = within_a_minute(lambda: engine(g, tmp_path).render(), fifo)
    assert rendered.fits
    problems = [a.error for a in rendered.actions if a.tier == "records"]
    if where == "records":
        assert ["is not a regular file" in str(p) for p in problems] == [True]
        assert not fifo.is_file()
    else:  # renamed over, never opened: the output is in a file of ours
        assert problems == [] and fifo.read_text() == f"{SECRET}\n{BIG}"
        fifo.unlink()
        os.mkfifo(fifo)
    with pytest.raises(ScrubRefused, match="not a regular file"):
        within_a_minute(lambda: scrub_session(store, "s", {"key": "sk-live-Q9x7"}), fifo)
    assert fifo.exists() and not fifo.is_file()
