"""A process killed inside an agentic function: reopening marks the function interrupted,
and leaves alone the functions whose owners are alive."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import openprogram
from graph import TOP, ConversationGraph, SQLStore
from openprogram import Session
from openprogram.testing import TestModel

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import sys, time
import openprogram

session = openprogram.Session(sys.argv[1], sys.argv[2], state_dir=sys.argv[3])

@openprogram.function
def long_job(n: int) -> None:
    session.graph.append({"role": "user", "content": "working on it"}, frame=openprogram.current_frame())
    print("started", flush=True)
    time.sleep(120)

with session:
    session.graph.append({"role": "user", "content": "start the job"})
    long_job(7)
"""


def _far() -> int:
    return (time.time_ns() // 1000) + 3_600_000_000


def _crash(db: Path, session_id: str, state: Path) -> None:
    """Run the child until it is inside ``long_job``, then SIGKILL it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db), session_id, str(state)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line == "started\n", child.stderr.read() if child.stderr else line
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()  # reaped: its pid is gone, not a zombie
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
    assert child.returncode == -signal.SIGKILL


def test_a_killed_process_leaves_an_interrupted_function(tmp_path: Path) -> None:
    db = tmp_path / "op.db"
    state = tmp_path / "state"
    _crash(db, "crashed", state)

    store = SQLStore(db)
    graph = ConversationGraph(store, "crashed")
    (killed,) = [n for n in graph.nodes() if n.kind == "function"]
    assert killed.status == "running"
    owner, _ = store.leases("crashed")[killed.id]
    assert owner.startswith(f"{socket.gethostname()}:")
    # functions whose owners live on: another host renewing its lease, and this process
    remote = graph.start_function("remote_job", {"host": "b"}, frame=TOP)
    store.put_lease("crashed", remote.id, "other-host:4242:abcd", _far())
    local = graph.start_function("local_job", frame=TOP)
    store.put_lease("crashed", local.id, f"{socket.gethostname()}:{os.getpid()}:ffff", _far())
    # and one whose lease ran out on another host: gone too
    stale = graph.start_function("stale_job", frame=TOP)
    store.put_lease("crashed", stale.id, "other-host:1:dead", 1)

    session = Session(db, "crashed", state_dir=state, model=TestModel(["noted"]))
    assert session.interrupted == [killed.id, stale.id]
    nodes = {n.id: n for n in session.graph.nodes()}
    assert nodes[killed.id].status == "interrupted"
    assert nodes[killed.id].finish.error == (  # type: ignore[union-attr]
        f"interrupted: its process ({owner}) is gone"
    )
    assert nodes[stale.id].status == "interrupted"
    assert nodes[remote.id].status == "running" and nodes[local.id].status == "running"
    assert set(store.leases("crashed")) == {remote.id, local.id}
    # what the killed function did is kept; callers see that it never finished
    inside = [n.payload.content for n in session.graph.children(killed.id)]  # type: ignore[union-attr]
    assert inside == ["working on it"]
    rendered = session.engine.render(head=session.graph.head_of(TOP)).messages
    results = [m["content"] for m in rendered if m["role"] == "tool"]
    assert results[0] == (
        f"[function long_job (node {killed.id}) never finished: interrupted: its process "
        f"({owner}) is gone]"
    )
    assert session.graph.nodes()[0].payload.content == "start the job"  # type: ignore[union-attr]
    # the session goes on, and reopening again changes nothing
    assert session.llm("what happened?") == "noted"
    again = Session(db, "crashed", state_dir=state)
    assert again.interrupted == []
    assert again.graph.get(remote.id).status == "running"


def test_a_function_started_outside_the_runtime(tmp_path: Path) -> None:
    db = tmp_path / "op.db"
    graph = ConversationGraph(SQLStore(db), "s")
    old = graph.start_function("old_job", frame=TOP, at=time.time() - 3_600)
    fresh = graph.start_function("fresh_job", frame=TOP)
    session = Session(db, "s", state_dir=tmp_path / "state", lease_ttl=60)
    assert session.interrupted == [old.id]
    assert "nothing happened in it" in str(session.graph.get(old.id).finish.error)  # type: ignore[union-attr]
    assert session.graph.get(fresh.id).status == "running"


def test_a_running_function_holds_a_lease_until_it_ends(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", state_dir=tmp_path / "state")
    seen: dict[str, tuple[str, int]] = {}

    @openprogram.function
    def job() -> None:
        seen.update(session.store.leases(session.id))
        # a second object on the session (a fork, another reader) leaves it running
        other = Session(session.store, session.id, state_dir=tmp_path / "state")
        assert other.interrupted == []

    with session:
        job()
    ((function_id, (owner, expires)),) = seen.items()
    assert owner == session.leases.owner
    assert expires > time.time_ns() // 1000
    assert session.graph.get(function_id).status == "completed"
    assert session.store.leases(session.id) == {}
    session.close()


@pytest.mark.postgres
def test_leases_on_postgres(pg_db_url: str, tmp_path: Path) -> None:
    graph = ConversationGraph(SQLStore(pg_db_url), "s")
    gone = graph.start_function("gone", frame=TOP)
    kept = graph.start_function("kept", frame=TOP)
    graph.store.put_lease("s", gone.id, f"{socket.gethostname()}:999999999:aa", _far())
    graph.store.put_lease("s", kept.id, "other-host:1:bb", _far())
    session = Session(pg_db_url, "s", state_dir=tmp_path / "state")
    assert session.interrupted == [gone.id]
    assert session.graph.get(kept.id).status == "running"
