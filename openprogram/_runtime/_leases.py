"""Who runs which function: leases with a heartbeat, and what reopening does with the dead.

Every function the runtime starts is leased to this process (host, pid, the pid's start
time, a random token) and the lease is renewed by a heartbeat thread. A session reopened
after a crash finds functions still ``running`` whose owner is gone and marks them
``interrupted`` with a sequenced event, so their subtrees stop being exempt from snip.

Whether an owner is gone:

* on this host, by its pid alone: a pid that runs, with the start time the lease names, is
  alive however late its heartbeat (a stopped process, a suspended laptop); a pid that is
  gone, or now names another process, is dead at once;
* on another host, by the clock: an expired lease is reclaimed only once a grace period
  (another lease lifetime by default) has passed as well.

Reclaiming is a compare-and-swap on the lease row, so an owner that renews meanwhile keeps
its work; an owner whose lease was taken learns it from :class:`LeaseLost` at its next
write (:meth:`LeaseKeeper.check`, :func:`check_lease`), never by finding its work finished.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from typing import NamedTuple

from graph import ConversationGraph, Edge, Event, Node, Store
from openprogram._errors import LeaseLost

_RECLAIMING: ContextVar[bool] = ContextVar("openprogram_reclaiming", default=False)
"""Set while ``mark_interrupted`` finishes a dead owner's functions: the one write into a
function another keeper (of this process, on a shared store object) may still hold."""

DEFAULT_TTL = 60.0
"""Seconds a lease lasts without a heartbeat (the heartbeat renews every third of it)."""


def _now_us() -> int:
    return time.time_ns() // 1000


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_start(pid: int) -> str | None:
    """When ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat`` field 22), or
    None where there is no such file (not Linux, or no such process). A pid that is reused
    gets another start time, so (pid, start) names one process for as long as it runs."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            text = file.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # the name in parentheses may hold spaces
    return fields[19] if len(fields) > 19 and fields[19].isdigit() else None


class Owner(NamedTuple):
    """A lease owner, as written ``host:pid:start:token`` (older leases: ``host:pid:token``)."""

    host: str
    pid: int | None
    start: str | None

    @classmethod
    def parse(cls, text: str) -> Owner:
        parts = text.split(":")
        host = parts[0]
        pid = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
        start = parts[2] if len(parts) > 3 and parts[2].isdigit() else None
        return cls(host, pid, start)


def check_lease(store: Store, session: str, owner: str, function_ids: Iterable[str]) -> None:
    """Raise :class:`LeaseLost` unless ``owner`` still holds the lease of every function in
    ``function_ids``. Inside ``store.transaction()`` it reads the rows of that transaction,
    so a commit that calls it first is fenced: it lands only while its lease is held."""
    wanted = list(function_ids)
    if not wanted:
        return
    leases = store.leases(session)
    for function_id in wanted:
        found = leases.get(function_id)
        if found is None or found[0] != owner:
            holder = "nobody" if found is None else found[0]
            raise LeaseLost(
                f"lost the lease on function {function_id} of session {session!r} "
                f"(it is held by {holder}); another process decided this process was gone"
            )


class LeaseKeeper:
    """The leases this process holds in one session, renewed while any is held."""

    def __init__(
        self, store: Store, session: str, ttl: float = DEFAULT_TTL, grace: float | None = None
    ) -> None:
        self.store = store
        self.session = session
        self.ttl = ttl
        self.grace = ttl if grace is None else grace
        """Seconds past its expiry before another host's lease is reclaimed."""
        self.host = socket.gethostname()
        pid = os.getpid()
        self.owner = f"{self.host}:{pid}:{process_start(pid) or 0}:{secrets.token_hex(4)}"
        self.lost: set[str] = set()
        """Functions whose lease another process took (their next write raises LeaseLost)."""
        self._held: set[str] = set()
        self._inside: dict[str, str] = {}
        """Nodes this process made inside a leased function → that function: an event on
        one (a tool's result) is work inside the function too."""
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        store.add_write_guard(self._fence)

    def _fence(self, session: str, records: Sequence[Node | Event], edges: Sequence[Edge]) -> None:
        """The store's write guard: a commit that writes inside a function this process
        leased (a node it calls, an event on it) lands only while the lease is still ours,
        checked in the commit's own transaction."""
        if session != self.session or _RECLAIMING.get():
            return
        with self._lock:
            mine = self._held | self.lost
            if not mine:
                return
            touched = {e.src for e in edges if e.type == "caller" and e.src in mine}
            self._inside.update(
                (e.dst, e.src) for e in edges if e.type == "caller" and e.src in mine
            )
            for record in records:
                if isinstance(record, Event):
                    owner = record.node_id if record.node_id in mine else None
                    owner = owner or self._inside.get(record.node_id)
                    if owner is not None:
                        touched.add(owner)
        if touched:
            self.check(touched)

    def mine(self) -> set[str]:
        """The functions this process leased (held now, or taken from it since)."""
        with self._lock:
            return self._held | self.lost

    def take(self, function_id: str) -> None:
        self.store.put_lease(self.session, function_id, self.owner, self._expiry())
        with self._lock:
            self._held.add(function_id)
            self.lost.discard(function_id)
            if self._thread is None or not self._thread.is_alive():
                self._wake.clear()
                self._thread = threading.Thread(
                    target=self._beat, name="openprogram-lease", daemon=True
                )
                self._thread.start()

    def release(self, function_id: str) -> None:
        with self._lock:
            self._held.discard(function_id)
            for node_id in [n for n, f in self._inside.items() if f == function_id]:
                del self._inside[node_id]
            lost = function_id in self.lost
            self.lost.discard(function_id)
        if not lost:  # a lease another process took is theirs to drop
            self.store.drop_lease(self.session, function_id)

    def check(self, function_ids: Iterable[str]) -> None:
        """Raise :class:`LeaseLost` when this process took the lease of any of
        ``function_ids`` and no longer holds it; functions it never leased are ignored."""
        with self._lock:
            mine = [f for f in function_ids if f in self._held or f in self.lost]
        try:
            check_lease(self.store, self.session, self.owner, mine)
        except LeaseLost:
            with self._lock:
                self.lost.update(mine)
                self._held.difference_update(mine)
            raise

    def close(self) -> None:
        self.store.remove_write_guard(self._fence)
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5)

    def _expiry(self) -> int:
        return _now_us() + int(self.ttl * 1_000_000)

    def _beat(self) -> None:
        while not self._wake.wait(self.ttl / 3):
            with self._lock:
                held = sorted(self._held)
                if not held:
                    # Under the lock: a take() from now on starts a new heartbeat rather
                    # than trusting this one, which is about to end.
                    self._thread = None
                    return
            for function_id in held:
                try:
                    renewed = self.store.renew_lease(
                        self.session, function_id, self.owner, self._expiry()
                    )
                except Exception:  # a missed beat is retried; the lease has slack
                    continue
                if not renewed:  # taken by another process: never taken back silently
                    with self._lock:
                        if function_id in self._held:
                            self._held.discard(function_id)
                            self.lost.add(function_id)

    def dead(self, owner: str, expires_us: int, now_us: int) -> bool:
        """Whether the process ``owner`` no longer runs anything."""
        if owner == self.owner:
            return False
        who = Owner.parse(owner)
        if who.host == self.host and who.pid is not None:
            if not _alive(who.pid):
                return True
            if who.start is not None:
                started = process_start(who.pid)
                return started is not None and started != who.start
            # an older lease names no start time: the pid might be another process now
        return expires_us + int(self.grace * 1_000_000) < now_us


def mark_interrupted(graph: ConversationGraph, keeper: LeaseKeeper) -> list[str]:
    """Mark ``interrupted`` every running function whose owner is gone (innermost first);
    return their ids. A function without a lease counts as gone once nothing happened in it
    for a lease's lifetime (it was started outside the runtime, by a process that died).

    A dead owner's lease is first claimed by a compare-and-swap; when that fails (the owner
    renewed it after all, or another process claimed it first) the function is left alone."""
    state = graph.state
    running = [node.id for node in graph.nodes() if node.kind == "function" and node.finish is None]
    if not running:
        return []
    leases = keeper.store.leases(graph.session)
    now = _now_us()
    marked: list[str] = []
    for function_id in sorted(running, key=lambda f: -len(state.ancestry(f))):
        lease = leases.get(function_id)
        if lease is not None:
            owner, expires = lease
            if not keeper.dead(owner, expires, now):
                continue
            claimed = keeper.store.renew_lease(
                graph.session, function_id, keeper.owner, keeper._expiry(), previous=owner
            )
            if not claimed:
                continue
            why = f"its process ({owner}) is gone"
        else:
            last = graph.get(state.frame_head(function_id)).at
            idle = now - int(last.timestamp() * 1_000_000)
            if idle < keeper.ttl * 1_000_000:
                continue
            why = "no process holds it and nothing happened in it for a lease's lifetime"
        token = _RECLAIMING.set(True)
        try:
            graph.finish_function(function_id, status="interrupted", error=f"interrupted: {why}")
        finally:
            _RECLAIMING.reset(token)
        keeper.store.drop_lease(graph.session, function_id)
        marked.append(function_id)
    return marked
