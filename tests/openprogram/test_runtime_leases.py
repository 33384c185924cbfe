"""Leases of running functions: a live owner keeps its work however late its heartbeat, an
owner on another host is reclaimed only after a grace period, and an owner whose lease was
taken learns it at its next write (``LeaseLost``), never by finding its work finished."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import openprogram
from graph import TOP, ConversationGraph, MemoryStore, SQLStore
from openprogram import LeaseLost, Session
from openprogram.testing import TestModel

ROOT = Path(__file__).resolve().parents[2]
TTL = 0.4
CHILD = """
import sys
import openprogram
from openprogram.testing import TestModel

session = openprogram.Session(
    sys.argv[1], "s", state_dir=sys.argv[2], lease_ttl=float(sys.argv[3]),
    model=TestModel(["still here"]),
)

@openprogram.function
def long_job() -> str:
    print("started", flush=True)
    sys.stdin.readline()  # the test stops and resumes this process meanwhile
    return session.llm("go on")

with session:
    print("finished", long_job(), flush=True)
"""


def _now_us() -> int:
    return time.time_ns() // 1000


def test_a_stopped_owner_keeps_its_work(store_url: str, tmp_path: Path) -> None:
    db = store_url
    state = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, db, str(state), str(TTL)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.stdout.readline() == "started\n"
        child.send_signal(signal.SIGSTOP)
        time.sleep(TTL * 5)  # its lease expires, grace period and all
        graph = ConversationGraph(SQLStore(db), "s")
        (job,) = [n for n in graph.nodes() if n.kind == "function"]
        ((owner, expires),) = graph.store.leases("s").values()
        assert expires < _now_us()
        second = Session(db, "s", state_dir=state, lease_ttl=TTL)
        assert second.interrupted == []
        assert second.graph.get(job.id).status == "running"
        assert graph.store.leases("s")[job.id][0] == owner
    finally:
        child.send_signal(signal.SIGCONT)
    out, err = child.communicate("resume\n", timeout=60)
    assert child.returncode == 0, err
    assert out == "finished still here\n"
    final = ConversationGraph(SQLStore(db), "s")
    assert final.get(job.id).status == "completed" and final.get(job.id).output == "still here"
    assert final.store.leases("s") == {}


def test_another_host_is_reclaimed_only_after_the_grace_period(tmp_path: Path) -> None:
    store = MemoryStore()
    graph = ConversationGraph(store, "s")
    late = graph.start_function("late", frame=TOP)
    gone = graph.start_function("gone", frame=TOP)
    now = _now_us()
    store.put_lease("s", late.id, "far:7:7:aa", now - 2_000_000)
    store.put_lease("s", gone.id, "far:8:8:bb", now - 20_000_000)
    session = Session(store, "s", state_dir=tmp_path, lease_ttl=10)
    assert session.interrupted == [gone.id]
    assert session.graph.get(late.id).status == "running"


def test_a_claim_loses_to_a_renewal(tmp_path: Path) -> None:
    store = MemoryStore()
    store.ensure_session("s")
    store.put_lease("s", "f", "far:1:1:aa", 1)
    assert store.renew_lease("s", "f", "far:1:1:aa", 50)  # the owner renews first
    assert not store.renew_lease("s", "f", "here:2:2:bb", 60, previous="far:1:1:old")
    assert store.leases("s")["f"] == ("far:1:1:aa", 50)
    assert store.renew_lease("s", "f", "here:2:2:bb", 60, previous="far:1:1:aa")
    assert not store.renew_lease("s", "f", "far:1:1:aa", 70)  # a heartbeat never takes it back
    assert store.leases("s")["f"] == ("here:2:2:bb", 60)


def test_an_owner_whose_lease_was_taken_gets_lease_lost(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", "s", state_dir=tmp_path / "state", model=TestModel(["x"]))
    seen: list[BaseException] = []

    @openprogram.function
    def job() -> None:
        (function_id,) = session.store.leases("s")
        # another host decided this process was gone (its lease, expired, is reclaimed)
        assert session.store.renew_lease(
            "s", function_id, "far:1:1:cc", 1, previous=session.leases.owner
        )
        other = Session(session.store, "s", state_dir=tmp_path / "state", lease_ttl=0.01)
        assert other.interrupted == [function_id]
        with pytest.raises(LeaseLost, match="lost the lease on function"):
            session.llm("more work")
        seen.append(LeaseLost())

    with session, pytest.raises(LeaseLost, match="held by nobody"):
        job()
    assert seen
    assert [n.role for n in session.graph.nodes() if n.kind == "message"] == []
    session.close()


def test_a_write_into_a_function_whose_lease_was_taken_is_lease_lost(
    tmp_path: Path,
) -> None:
    session = Session(tmp_path / "op.db", "s", state_dir=tmp_path / "state")

    @openprogram.function
    def job() -> None:
        (function_id,) = session.store.leases("s")
        assert session.store.renew_lease(
            "s", function_id, "far:1:1:cc", 1, previous=session.leases.owner
        )
        other = Session(session.store, "s", state_dir=tmp_path / "state", lease_ttl=0.01)
        assert other.interrupted == [function_id]  # expired on another host, grace and all
        session.graph.append({"role": "user", "content": "late"}, frame=openprogram.current_frame())

    with session, pytest.raises(LeaseLost, match="held by nobody"):
        job()  # the store refused the append: it is fenced in the commit's transaction
    session.graph.refresh()
    (function,) = [n for n in session.graph.nodes() if n.kind == "function"]
    assert function.status == "interrupted"  # what the other process decided stands
    assert session.graph.children(function.id) == []  # and the late write is not stored
    session.close()


def test_a_render_whose_lease_was_taken_commits_nothing(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", "s", state_dir=tmp_path / "state")
    stored: dict[str, object] = {}

    @openprogram.function
    def job() -> None:
        (function_id,) = session.store.leases("s")
        stored.update(session.store.get_values("s", "context.state"))
        assert session.store.renew_lease(
            "s", function_id, "far:1:1:cc", 1, previous=session.leases.owner
        )
        Session(session.store, "s", state_dir=tmp_path / "state", lease_ttl=0.01)
        session.engine.render(frame=function_id)  # its commit is fenced like an append

    with session, pytest.raises(LeaseLost, match="held by nobody"):
        job()
    assert session.store.get_values("s", "context.state") == stored  # no tier state landed
    assert session.receipt() is None  # nor its receipt: one transaction
    rendered = session.engine.render()  # a render that commits leaves its receipt with it
    receipt = session.receipt()
    assert receipt is not None and receipt.tokens == rendered.tokens
    session.close()


def test_a_tool_result_inside_a_function_whose_lease_was_taken_is_lease_lost(
    tmp_path: Path,
) -> None:
    session = Session(tmp_path / "op.db", "s", state_dir=tmp_path / "state")

    @openprogram.function
    def job() -> None:
        frame = openprogram.current_frame()
        call = {"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{}"}}
        session.graph.append(
            {"role": "assistant", "content": None, "tool_calls": [call]}, frame=frame
        )
        (function_id,) = session.store.leases("s")
        assert session.store.renew_lease(
            "s", function_id, "far:1:1:cc", 1, previous=session.leases.owner
        )
        Session(session.store, "s", state_dir=tmp_path / "state", lease_ttl=0.01)
        session.graph.append({"role": "tool", "tool_call_id": "c1", "content": "late"}, frame=frame)

    with session, pytest.raises(LeaseLost, match="held by nobody"):
        job()
    session.graph.refresh()
    (tool,) = [n for n in session.graph.nodes() if n.kind == "tool"]
    assert tool.result is None  # the late result is not stored
    session.close()
