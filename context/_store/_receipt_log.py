"""Receipts stored as what changed: a whole receipt now and then, the rest as deltas.

A long session's prompts share almost all their messages with the one before, so writing
each receipt whole (a digest and a source per message, three times: the log, the last of
the session, the last of its frame) grows every request's write with the history. Here a
receipt is written whole once (its *base*, kept by id), and the receipts after it name that
base, how many of its messages and sources they start with, and only their own suffix.
Reading resolves a delta against its base, so every reader gets exactly the receipt that
was written. A receipt written before deltas decodes as a whole one (no field says
otherwise), so old databases read as they did.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from graph import SideData

from .._errors import ContextError
from .._prefix import equal_prefix
from ._receipt import RenderReceipt

RECEIPTS = "context.receipts"
"""The log of every receipt, and (as values) the last one per frame and overall, and the
whole receipts deltas name (``@`` and their id)."""
LAST = "~last"
BASE = "@"
DELTA_MIN = 64
"""A delta's suffix may hold this many messages, or a quarter of its base, before the next
receipt is written whole again."""
CACHED_BASES = 8
_SUFFIXED = ("message_digests", "sources")


class StoredReceipt(RenderReceipt, frozen=True, kw_only=True):
    """A receipt as stored: with ``base`` set, its ``message_digests`` and ``sources`` are
    only what follows the first ``shared`` ones of receipt ``base``."""

    base: str = ""
    shared: int = 0


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(StoredReceipt)
_FIELDS = RenderReceipt.__struct_fields__


def _whole(stored: StoredReceipt, base: RenderReceipt | None) -> RenderReceipt:
    fields = {name: getattr(stored, name) for name in _FIELDS}
    if stored.base:
        if base is None:
            raise ContextError(
                f"receipt {stored.id!r} of session {stored.session!r} is stored as changes to "
                f"receipt {stored.base!r}, which is not stored"
            )
        fields["message_digests"] = base.message_digests[: stored.shared] + stored.message_digests
        fields["sources"] = base.sources[: stored.shared] + stored.sources
    return RenderReceipt(**fields)


class ReceiptLog:
    """One session's receipts in its side data, written as deltas against a whole one."""

    def __init__(self, store: SideData, session: str) -> None:
        self.store = store
        self.session = session
        self._bases: dict[str, RenderReceipt] = {}
        """The whole receipt each frame's deltas name, once it is known to be stored."""
        self._written: dict[str, RenderReceipt] = {}
        """A whole receipt written by a transaction not known to have committed yet."""
        self._read: dict[str, RenderReceipt] = {}

    def write(self, receipt: RenderReceipt) -> None:
        """Log ``receipt`` and keep it as its frame's and the session's last, inside the
        caller's transaction."""
        frame = receipt.frame or "-"
        stored = self._delta(receipt, frame)
        values = {}
        if stored is None:  # written whole: later receipts name it
            values[BASE + receipt.id] = _encoder.encode(receipt).decode()
            self._written[frame] = receipt
            self._bases.pop(frame, None)
            stored = StoredReceipt(
                **{name: getattr(receipt, name) for name in _FIELDS},
                base=receipt.id,
                shared=len(receipt.message_digests),
            )
            stored = msgspec.structs.replace(stored, message_digests=(), sources=())
        text = _encoder.encode(stored).decode()
        self.store.append_log(self.session, RECEIPTS, [(receipt.id, text)], receipt.seq)
        values[LAST] = values[frame] = text
        self.store.put_values(self.session, RECEIPTS, values)

    def _delta(self, receipt: RenderReceipt, frame: str) -> StoredReceipt | None:
        """``receipt`` as a delta against its frame's base, or None to write it whole."""
        base = self._bases.get(frame)
        if base is None:
            written = self._written.pop(frame, None)
            if written is None or not self._stored([written.id]):
                return None
            base = self._bases[frame] = written  # its transaction committed
        digests, sources = receipt.message_digests, receipt.sources
        if len(sources) != len(digests) or len(base.sources) != len(base.message_digests):
            return None
        shared = equal_prefix(base.message_digests, digests)
        shared = equal_prefix(base.sources[:shared], sources[:shared])
        suffix = len(digests) - shared
        if not shared or suffix > max(DELTA_MIN, len(base.message_digests) // 4):
            return None
        return StoredReceipt(
            **{name: getattr(receipt, name) for name in _FIELDS if name not in _SUFFIXED},
            message_digests=digests[shared:],
            sources=sources[shared:],
            base=base.id,
            shared=shared,
        )

    def _stored(self, ids: Iterable[str]) -> dict[str, str]:
        keys = [BASE + i for i in ids]
        return self.store.get_values(self.session, RECEIPTS, keys)

    def last(self, key: str) -> RenderReceipt | None:
        """The receipt stored as value ``key`` (the last of the session or of a frame)."""
        found = self.store.get_values(self.session, RECEIPTS, [key]).get(key)
        return None if found is None else self._resolve([_decoder.decode(found)])[0]

    def all(self) -> list[RenderReceipt]:
        """Every receipt, oldest first."""
        entries = self.store.read_log(self.session, RECEIPTS)
        return self._resolve([_decoder.decode(entry.body) for entry in entries])

    def _resolve(self, stored: list[StoredReceipt]) -> list[RenderReceipt]:
        wanted = {s.base for s in stored if s.base and s.base not in self._read}
        if wanted:
            found = self._stored(wanted)
            for key, text in found.items():
                whole = _decoder.decode(text)
                self._read[key[len(BASE) :]] = _whole(whole, None)
        resolved = [_whole(s, self._read.get(s.base)) for s in stored]
        if len(self._read) > CACHED_BASES:
            needed = {s.base for s in stored}
            self._read = {k: v for k, v in self._read.items() if k in needed}
        return resolved
