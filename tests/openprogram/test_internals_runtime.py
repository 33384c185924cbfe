"""The runtime's parts under ``Session``, tested alone: the lease mechanics (an owner names
its process start, who is dead, a lease checked inside a transaction, a heartbeat that ends)
and the tool runner the loop calls (validated arguments, result text, async tools)."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from graph import MemoryStore, SQLStore
from openprogram import LeaseLost, ToolSpec

# internal: the lease keeper and the tool runner, below the Session that drives them
from openprogram._runtime._leases import LeaseKeeper, Owner, check_lease, process_start
from openprogram._runtime._tools import arun_tool, result_text, run_tool
from tests.openprogram.test_runtime_tools import Point, grep


def _now_us() -> int:
    return time.time_ns() // 1000


def test_the_owner_names_its_process_start() -> None:
    keeper = LeaseKeeper(MemoryStore(), "s")
    who = Owner.parse(keeper.owner)
    assert who.host == socket.gethostname() and who.pid == os.getpid()
    assert who.start == process_start(os.getpid()) and who.start is not None
    assert Owner.parse("h:12:tok") == Owner("h", 12, None)  # an older lease


def test_who_is_dead() -> None:
    keeper = LeaseKeeper(MemoryStore(), "s", ttl=10)
    host, me, start = keeper.host, os.getpid(), process_start(os.getpid())
    now = _now_us()
    long_ago = now - 60_000_000
    # this host: by pid and start time, whatever the clock says
    assert not keeper.dead(f"{host}:{me}:{start}:aa", long_ago, now)
    assert keeper.dead(f"{host}:{me}:1:aa", now + 60_000_000, now)  # the pid is reused
    assert keeper.dead(f"{host}:999999999:0:aa", now + 60_000_000, now)
    # another host: expired, and then a grace period (the ttl) more
    assert not keeper.dead("far:1:1:aa", now - 5_000_000, now)
    assert keeper.dead("far:1:1:aa", now - 11_000_000, now)
    assert not keeper.dead("far:1:1:aa", now + 1, now)


def test_check_lease_inside_a_transaction(tmp_path: Path) -> None:
    store = SQLStore(tmp_path / "op.db")
    store.ensure_session("s")
    store.put_lease("s", "f", "me", _now_us() + 10**9)
    with store.transaction():
        check_lease(store, "s", "me", ["f"])
        with pytest.raises(LeaseLost, match="held by me"):
            check_lease(store, "s", "you", ["f"])
    check_lease(store, "s", "you", [])


def test_a_heartbeat_that_ends_lets_the_next_lease_start_another(tmp_path: Path) -> None:
    store = SQLStore(tmp_path / "op.db")
    store.ensure_session("s")
    keeper = LeaseKeeper(store, "s", ttl=0.03)
    # a heartbeat thread that finds nothing held ends; one that is ending (still alive)
    # when the next lease is taken must not be trusted to renew it
    keeper._thread = threading.current_thread()
    keeper._beat()
    keeper.take("f1")
    try:
        assert keeper._thread is not None
        assert keeper._thread is not threading.current_thread()
        assert keeper._thread.is_alive()
    finally:
        keeper.release("f1")
        keeper.close()


def test_arguments_are_validated() -> None:
    spec = ToolSpec(grep, name="search-files")
    assert spec.name == "search-files"
    assert spec.bind('{"pattern": "x"}') == {"pattern": "x", "path": ".", "mode": "fast"}
    with pytest.raises(ValueError, match="mode: Input should be 'fast' or 'full'"):
        spec.bind('{"pattern": "x", "mode": "slow"}')
    with pytest.raises(ValueError, match="pattern: Field required"):
        spec.bind("")  # no arguments at all: an empty object
    assert run_tool(spec, '{"pattern": "a", "mode": "full"}') == ('[".:a:full"]', False)


def test_nested_models_as_arguments() -> None:
    def plot(points: list[Point]) -> int:
        """Plot points."""
        return sum(p.x * p.y for p in points)

    spec = ToolSpec(plot)
    assert spec.schema()["function"]["parameters"]["$defs"]["Point"]["required"] == ["x", "y"]
    assert run_tool(spec, '{"points": [{"x": 2, "y": 3}, {"x": 1, "y": 1}]}') == ("7", False)


def test_result_text() -> None:
    assert result_text("plain") == "plain"
    assert result_text(Point(x=1, y=2)) == '{"x":1,"y":2}'
    assert result_text({"a": [1, 2], "b": None}) == '{"a":[1,2],"b":null}'
    assert result_text(12) == "12"
    odd = object()
    assert result_text(odd) == repr(odd)


def test_async_tools_in_sync_and_async_loops() -> None:
    async def slow(n: int) -> dict[str, Any]:
        """Sleeps a moment."""
        await asyncio.sleep(0)
        return {"n": n}

    def fails(n: int) -> int:
        """Fails."""
        raise KeyError(n)

    spec = ToolSpec(slow)
    assert spec.is_async
    assert run_tool(spec, '{"n": 1}') == ('{"n":1}', False)
    assert asyncio.run(arun_tool(spec, '{"n": 2}')) == ('{"n":2}', False)
    assert asyncio.run(arun_tool(ToolSpec(fails), '{"n": 3}')) == ("Error: 3", True)
    assert asyncio.run(arun_tool(spec, '{"n": "x"}'))[1] is True
