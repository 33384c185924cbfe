"""Who runs which function: leases with a heartbeat, and what reopening does with the dead.

Every function the runtime starts is leased to this process (host, pid, a random token)
and the lease is renewed by a heartbeat thread. A session reopened after a crash finds
functions still ``running`` whose owner is gone — lease expired, or the pid dead on this
host — and marks them ``interrupted`` with a sequenced event, so their subtrees stop being
exempt from snip. A function whose lease another live process keeps renewing (another
host on PostgreSQL, say) is never touched.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time

from graph import ConversationGraph, Store

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


class LeaseKeeper:
    """The leases this process holds in one session, renewed while any is held."""

    def __init__(self, store: Store, session: str, ttl: float = DEFAULT_TTL) -> None:
        self.store = store
        self.session = session
        self.ttl = ttl
        self.host = socket.gethostname()
        self.owner = f"{self.host}:{os.getpid()}:{secrets.token_hex(4)}"
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def take(self, function_id: str) -> None:
        self.store.put_lease(self.session, function_id, self.owner, self._expiry())
        with self._lock:
            self._held.add(function_id)
            if self._thread is None or not self._thread.is_alive():
                self._wake.clear()
                self._thread = threading.Thread(
                    target=self._beat, name="openprogram-lease", daemon=True
                )
                self._thread.start()

    def release(self, function_id: str) -> None:
        with self._lock:
            self._held.discard(function_id)
        self.store.drop_lease(self.session, function_id)

    def close(self) -> None:
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
                    self.store.put_lease(self.session, function_id, self.owner, self._expiry())
                except Exception:  # a missed beat is retried; the lease has slack
                    continue

    def dead(self, owner: str, expires_us: int, now_us: int) -> bool:
        """Whether the process ``owner`` no longer runs anything."""
        if owner == self.owner:
            return False
        if expires_us < now_us:
            return True
        host, _, rest = owner.partition(":")
        pid = rest.partition(":")[0]
        return host == self.host and pid.isdigit() and not _alive(int(pid))


def mark_interrupted(graph: ConversationGraph, keeper: LeaseKeeper) -> list[str]:
    """Mark ``interrupted`` every running function whose owner is gone (innermost first);
    return their ids. A function without a lease counts as gone once nothing happened in it
    for a lease's lifetime (it was started outside the runtime, by a process that died)."""
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
            why = f"its process ({owner}) is gone"
        else:
            last = graph.get(state.frame_head(function_id)).at
            idle = now - int(last.timestamp() * 1_000_000)
            if idle < keeper.ttl * 1_000_000:
                continue
            why = "no process holds it and nothing happened in it for a lease's lifetime"
        graph.finish_function(function_id, status="interrupted", error=f"interrupted: {why}")
        keeper.store.drop_lease(graph.session, function_id)
        marked.append(function_id)
    return marked
