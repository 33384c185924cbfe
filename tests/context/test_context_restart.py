"""Restarts render byte-identically from what the store kept; a preview writes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _context_helpers import Stable, policy
from _layer_helpers import clock, encode, session

from context import (
    ContextEngine,
    ContextStorage,
    Policy,
    Rendered,
    read_jsonl,
    records_path,
)
from graph import ConversationGraph, MemoryStore, seeded_ids

BUDGET = 3_000
SHORT_PREVIEW = {"offload_preview_head_chars": 600, "offload_preview_tail_chars": 400}


def tuned(tmp_path: Path, **overrides: Any) -> Policy:
    """Collapse, microcompact and snip all fire in a session of ~60 rounds at 3k."""
    return policy(tmp_path, microcompact_first=10, microcompact_every=5, **overrides)


def run(g: ConversationGraph, e: ContextEngine, first: int, turns: int) -> set[str]:
    tiers: set[str] = set()
    for i in range(first, first + turns):
        session(g, 1, first=i)
        rendered = e.render()
        assert rendered.fits
        tiers |= {r.tier for r in rendered.records}
    return tiers


def test_a_restarted_engine_renders_the_same_and_records_nothing(
    store_url: str, tmp_path: Path
) -> None:
    g = ConversationGraph.open(store_url, session="s1")
    try:
        session(g, 2)
        pol = tuned(tmp_path)
        e = ContextEngine(g, pol, budget=BUDGET, clock=clock)
        tiers = run(g, e, 2, 40)
        assert {"collapse", "microcompact"} <= tiers and tiers & {"snip", "compact"}
        last = e.render()
        records = e.records()
        jsonl = records_path(e.folder.path, "s1").read_bytes()
        state = g.store.get_values("s1", "context.state")
    finally:
        g.close()

    again = ConversationGraph.open(store_url, session="s1")
    try:
        restarted = ContextEngine(again, pol, budget=BUDGET, clock=clock)
        rendered = restarted.render()
        assert json.dumps(rendered.messages) == json.dumps(last.messages)
        assert rendered.tokens == last.tokens
        assert encode(rendered) == encode(last)
        assert rendered.records == []
        assert restarted.records() == records
        assert records_path(restarted.folder.path, "s1").read_bytes() == jsonl
        assert again.store.get_values("s1", "context.state") == state
        # ...and it goes on as the first engine would have.
        session(again, 1, first=42)
        assert restarted.render().fits
    finally:
        again.close()


class WiderPolicy(Policy):
    """A policy with one more setting, as a later version may have."""

    unrelated_setting: int = 7


def test_only_a_recorded_configuration_starts_new_tier_state(tmp_path: Path) -> None:
    g = ConversationGraph.open(tmp_path / "op.db", session="s1")
    try:
        session(g, 2)
        e = ContextEngine(g, tuned(tmp_path), budget=BUDGET, clock=clock)
        run(g, e, 2, 30)
        last = e.render()
        keys = sorted(g.store.get_values("s1", "context.state"))
        # A policy with a setting added (a new version's Policy) keeps the sticky state:
        # tier state is kept by session, epoch and frame, not by a hash of every setting.
        wider = WiderPolicy(**tuned(tmp_path).model_dump())
        assert wider.fingerprint != tuned(tmp_path).fingerprint
        again = ContextEngine(g, wider, budget=BUDGET, clock=clock)
        assert encode(again.render()) == encode(last)
        assert sorted(g.store.get_values("s1", "context.state")) == keys
        # A recorded configuration event starts a new epoch: its decisions start afresh.
        assert ContextStorage(g.store, "s1", e.folder).configure({"budget": BUDGET}) == 1
        fresh = ContextEngine(g, tuned(tmp_path), budget=BUDGET, clock=clock)
        assert fresh.render().fits
        assert {k.split(":")[0] for k in g.store.get_values("s1", "context.state")} >= {
            "e0",
            "e1",
        }
        [event] = ContextStorage(g.store, "s1", e.folder).configurations()
        assert event["epoch"] == 1 and event["changes"] == {"budget": BUDGET}
    finally:
        g.close()


# -- preview --------------------------------------------------------------------------


def stored(g: ConversationGraph, e: ContextEngine, pol: Policy) -> dict[str, Any]:
    """Everything a render could write."""
    folder = e.folder.path
    files = sorted(
        (str(p.relative_to(folder)), p.read_bytes()) for p in folder.rglob("*") if p.is_file()
    )
    return {
        "records": e.records(),
        "files": files,
        "layers": g.layers(),
        "last_seq": g.last_seq,
        "state": g.store.get_values(g.session, "context.state"),
        "tokens": g.store.get_values(g.session, f"context.tokens.{e.counter.encoding_name}"),
    }


def stable(rendered: Rendered, tmp_path: Path) -> Any:
    return Stable(tmp_path)([rendered.messages, rendered.tokens])


def twin_of(g: ConversationGraph, e: ContextEngine) -> ConversationGraph:
    """A copy of the session and of what the engine persisted (same ids, same state)."""
    twin = g.clone(MemoryStore(), g.session)
    for namespace in ("context.state", f"context.tokens.{e.counter.encoding_name}"):
        twin.store.put_values(g.session, namespace, g.store.get_values(g.session, namespace))
    return twin


@pytest.mark.parametrize("turns", [6, 14, 25])
def test_a_preview_writes_nothing_and_changes_nothing(tmp_path: Path, turns: int) -> None:
    g = ConversationGraph.open(tmp_path / "op.db", session="s1")
    try:
        session(g, 2)
        pol = tuned(tmp_path, offload_chars=1_000, **SHORT_PREVIEW)
        e = ContextEngine(g, pol, budget=BUDGET, clock=clock)
        run(g, e, 2, turns)
        session(g, 6, first=100, words=80)  # enough that the next render summarizes
        twin = twin_of(g, e)
        before = stored(g, e, pol)

        preview = e.preview()
        assert preview.preview and preview.fits
        assert {a.tier for a in preview.actions} - {"offload", "budget_reduction", "snip"}
        assert stored(g, e, pol) == before
        again = e.render(preview=True)
        assert encode(again) == encode(preview)
        assert stored(g, e, pol) == before
        assert e.last is not preview and e.last is not again

        # The next real render is what it would have been without the preview (a fresh
        # engine on a copy of the session and its state shows that), and the preview
        # showed exactly it.
        real = e.render()
        assert not real.preview
        expected = ContextEngine(twin, pol, budget=BUDGET, clock=clock, state_dir=e.folder).render()
        assert encode(real) == encode(expected)
        # (The twin shares the state folder: the files it would offload are there already.)
        assert [(r.tier, r.tokens_after) for r in real.records if r.tier != "offload"] == [
            (r.tier, r.tokens_after) for r in expected.records
        ]
        assert encode(real) == encode(preview)
    finally:
        g.close()


def test_a_preview_makes_no_offload_file_layer_or_record(tmp_path: Path) -> None:
    g = ConversationGraph.open(tmp_path / "op.db", session="s1")
    try:
        session(g, 24, words=400)  # long outputs: offload (always) has work to do
        pol = policy(tmp_path, offload_chars=2_000, **SHORT_PREVIEW)
        e = ContextEngine(g, pol, budget=BUDGET, clock=clock)
        before = stored(g, e, pol)
        assert before["files"] == [] and before["layers"] == [] and before["state"] == {}
        with seeded_ids("layers"):  # the same layer ids both times: ids tokenize unevenly
            preview = e.preview()
        tiers = {a.tier for a in preview.actions}
        assert {"offload", "collapse"} <= tiers
        assert "collapse" in {r.tier for r in preview.records}
        assert stored(g, e, pol) == before
        assert not (e.folder.path / "tool_results").exists()
        assert not records_path(e.folder.path, "s1").exists()
        assert e.layers() == [] and e.records() == []
        assert list(read_jsonl(records_path(e.folder.path, "s1"))) == []

        with seeded_ids("layers"):
            real = e.render()
        assert stable(real, tmp_path)[0] == stable(preview, tmp_path)[0]
        assert real.tokens == preview.tokens
        assert (e.folder.path / "tool_results" / "s1").is_dir()
        assert len(g.layers()) == len(
            [r for r in real.records if r.tier in ("collapse", "compact")]
        )
    finally:
        g.close()
