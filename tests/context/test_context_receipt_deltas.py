"""Receipts are stored as the changes since an earlier one and read back whole."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context import ContextStorage, MessageSource, RenderReceipt
from graph import ConversationGraph, SQLStore

SESSION = "s1"


def _receipt(n: int, frame: str | None, digests: list[str]) -> RenderReceipt:
    return RenderReceipt(
        id=f"r{n}",
        session=SESSION,
        seq=n,
        head=f"h{n}",
        frame=frame,
        tools_digest="t",
        tool_tokens=3,
        budget=1_000,
        configured_budget=1_000,
        tokens=len(digests) * 7,
        messages=len(digests),
        message_digests=tuple(digests),
        sources=tuple(
            MessageSource(nodes=(d,), variant="full", unit="round", current=i == len(digests) - 1)
            for i, d in enumerate(digests)
        ),
        records=(f"rec{n}",),
    )


steps = st.lists(
    st.tuples(
        st.sampled_from([None, "f1"]),  # the frame
        st.integers(0, 40),  # messages dropped from the end of that frame's last prompt
        st.integers(0, 90),  # messages added after them
        st.booleans(),  # its transaction rolls back
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_receipts_read_back_exactly_as_written(
    plan: list[tuple[str | None, int, int, bool]],
) -> None:
    """Whatever each prompt shares with the one before (all, a prefix, nothing), in one or
    two frames, with transactions that roll back in between: every reader gets back each
    committed receipt exactly, and a process that opens the store anew does too."""
    store = ConversationGraph.memory(SESSION).store
    storage = ContextStorage(store, SESSION)
    prompts: dict[str | None, list[str]] = {None: [], "f1": []}
    kept: list[RenderReceipt] = []
    for n, (frame, drop, add, fails) in enumerate(plan):
        before = prompts[frame]
        digests = before[: max(0, len(before) - drop)] + [f"d{n}.{i}" for i in range(add)]
        receipt = _receipt(n, frame, digests)
        if fails:
            try:
                with store.transaction():
                    storage.save_receipt(receipt, [])
                    raise RuntimeError("the commit failed")
            except RuntimeError:
                pass
            continue
        storage.save_receipt(receipt, [])
        prompts[frame] = digests
        kept.append(receipt)
        assert storage.last_receipt() == receipt
    for reader in (storage, ContextStorage(store, SESSION)):
        assert reader.receipts() == kept
        for frame in (None, "f1"):
            mine = [r for r in kept if r.frame == frame]
            assert reader.last_receipt(frame) == (mine[-1] if mine else None)


def test_a_long_session_writes_little_per_receipt_and_old_receipts_still_read(
    tmp_path: Path,
) -> None:
    """A receipt written whole by an older version (as it stored them: the log, the last
    of the session and of the frame) reads back beside the new ones; the new ones after a
    whole one store only what they add."""
    db = tmp_path / "a.db"
    store = SQLStore(db)
    storage = ContextStorage(store, SESSION)
    history = [f"d{i}" for i in range(1_000)]
    old = _receipt(0, None, history)
    text = json.dumps(msgspec.to_builtins(old))  # how an older version stored it
    store.append_log(SESSION, "context.receipts", [(old.id, text)], old.seq)
    store.put_values(SESSION, "context.receipts", {"~last": text, "-": text})
    assert storage.last_receipt() == old
    written = [old]
    for n in range(1, 30):
        history = [*history, f"q{n}", f"a{n}"]
        written.append(_receipt(n, None, history))
        storage.save_receipt(written[-1], [])
    reopened = ContextStorage(SQLStore(db, create=False), SESSION)
    assert reopened.receipts() == written
    assert reopened.last_receipt() == written[-1] == reopened.last_receipt(None)
    bodies = [e.body for e in store.read_log(SESSION, "context.receipts")]
    assert len(bodies[0]) > 50_000  # the old one, whole
    assert max(len(body) for body in bodies[2:]) < 5_000  # after the first whole new one
