"""The Agents SDK session's item list, stored so that a write costs what it adds.

Every item the SDK wrote is kept once, by the sha256 of its JSON (``ITEMS``). The current
list is a base list of those keys (``LIVE``, rewritten whole only when the list changes other
than at its end: a popped item, a cleared session, a turn the new items continue) and the
chunks appended to it since (``ADDED``, one value per write). A run then stores its input and
its answer as two small chunks instead of the whole list twice. Each base carries an epoch;
the chunks name the epoch they extend, so a base written again leaves older chunks unread.
Both are side values, so an export carries them and an import reads them back the same.
"""

from __future__ import annotations

import json
import uuid

from agents.items import TResponseInputItem

from openprogram._runtime._session import Session

__all__ = ["ADDED", "ITEMS", "LIVE", "StoredItems"]

ITEMS = "openai_agents.items"
"""Store side-data namespace: every item the SDK wrote, by the sha256 of its JSON."""
LIVE = "openai_agents.live"
"""Store side-data namespace: each SDK session's base list (keys into ``ITEMS``) and, under
``<session id>\\n+``, the epoch and count of the chunks appended to it."""
ADDED = "openai_agents.live.added"
"""Store side-data namespace: the chunks appended to a base, ``<session id>\\n<epoch>\\n<n>``."""
MAX_CHUNKS = 128
"""Chunks a base takes before the next write stores the whole list as a new base (a reader
then fetches few values, and the writes stay what they add, amortized)."""


class StoredItems:
    """One SDK session's stored list: read once, then kept in step with what this process
    writes."""

    def __init__(self, session: Session, session_id: str) -> None:
        self.session = session
        self.session_id = session_id
        self._keys: list[str] | None = None
        self._epoch: str | None = None
        self._chunks = 0
        self._live: list[TResponseInputItem] | None = None
        self.items: dict[str, TResponseInputItem] = {}
        """The items read or written, by key (the exact ones the SDK wrote, in this process)."""
        self._texts: dict[str, str] = {}
        """Each of those items' JSON, by key: a reader's copy is parsed from it."""
        self._pending: tuple[list[str], str | None, int, dict[str, TResponseInputItem]] = (
            [],
            None,
            0,
            {},
        )

    def keys(self) -> list[str]:
        """The current list's keys (read from the store the first time)."""
        if self._keys is None:
            self._keys = self._read()
        return self._keys

    def live(self) -> list[TResponseInputItem]:
        """The current list's items (those not read yet fetched in one query); the same
        list until the next write (read it, never change it)."""
        if self._live is not None:
            return self._live
        keys = self.keys()
        missing = [key for key in keys if key not in self.items]
        if missing:
            store, session = self.session.store, self.session.id
            for key, text in store.get_values(session, ITEMS, missing).items():
                self.items[key], self._texts[key] = json.loads(text), text
        self._live = [self.items[key] for key in keys]
        return self._live

    def copied(self, limit: int | None = None) -> list[TResponseInputItem]:
        """A copy of the current list (its last ``limit`` items, if given), new objects a
        reader may change: parsed from the items' JSON, in C."""
        self.live()
        keys = self.keys() if limit is None else self.keys()[-limit:] if limit else []
        texts = self._texts
        copy: list[TResponseInputItem] = json.loads(f"[{','.join([texts[k] for k in keys])}]")
        return copy

    def write(self, keys: list[str], new: dict[str, TResponseInputItem]) -> None:
        """Make ``keys`` the list, storing ``new`` (items not stored yet) first: as a chunk
        when it extends the current list, whole otherwise. The caller holds the transaction
        and calls :meth:`written` when it commits."""
        store, session = self.session.store, self.session.id
        if new:
            # A redacting session stores items redacted too; this process keeps the exact
            # ones the SDK wrote (another process reads them redacted).
            redactor = self.session.graph.redactor
            values = {k: json.dumps(redactor.value(i) if redactor else i) for k, i in new.items()}
            store.put_values(session, ITEMS, values)
        current = self.keys()
        sid = self.session_id
        extends = len(keys) > len(current) and keys[: len(current)] == current
        if extends and self._epoch is not None and self._chunks < MAX_CHUNKS:
            chunk = json.dumps(keys[len(current) :])
            store.put_values(session, ADDED, {f"{sid}\n{self._epoch}\n{self._chunks}": chunk})
            count = json.dumps({"epoch": self._epoch, "chunks": self._chunks + 1})
            store.put_values(session, LIVE, {f"{sid}\n+": count})
            self._pending = (keys, self._epoch, self._chunks + 1, new)
            return
        epoch = uuid.uuid4().hex
        store.put_values(session, LIVE, {sid: json.dumps({"keys": keys, "epoch": epoch})})
        self._pending = (keys, epoch, 0, new)

    def written(self) -> None:
        """What :meth:`write` stored is committed: keep it."""
        keys, self._epoch, self._chunks, new = self._pending
        self._keys, self._live = keys, None
        for key, item in new.items():
            text = json.dumps(item)
            self.items[key], self._texts[key] = json.loads(text), text

    def _read(self) -> list[str]:
        store, session, sid = self.session.store, self.session.id, self.session_id
        stored = store.get_values(session, LIVE, [sid, f"{sid}\n+"])
        if sid not in stored:
            self._epoch, self._chunks = None, 0
            return []
        base = json.loads(stored[sid])
        if isinstance(base, list):  # written before the chunks: a whole list, no epoch
            self._epoch, self._chunks = None, 0
            return [str(key) for key in base]
        keys: list[str] = [str(key) for key in base["keys"]]
        self._epoch, self._chunks = str(base["epoch"]), 0
        count = json.loads(stored.get(f"{sid}\n+", "null"))
        if isinstance(count, dict) and count.get("epoch") == self._epoch:
            self._chunks = int(count["chunks"])
            wanted = [f"{sid}\n{self._epoch}\n{n}" for n in range(self._chunks)]
            chunks = store.get_values(session, ADDED, wanted)
            for name in wanted:
                keys += json.loads(chunks[name])
        return keys

    def forget(self) -> None:
        """Read the list again next time (a write that did not commit)."""
        self._keys, self._live = None, None
