"""Compaction records, offload fail-open, the persisted token cache, idle microcompact."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from _context_helpers import policy, start, state_of, tool_round
from _faults import Faults, injected

import context
from context import (
    CompactionRecord,
    ContextEngine,
    OffloadError,
    TokenCounter,
    offload_path,
    read_jsonl,
    records_path,
    render_context,
    tool_pair_problems,
)
from graph import ConversationGraph, node_handle

BIG = "".join(f"row {i:05d} " + "v" * 50 + "\n" for i in range(250))  # 15,000 chars


def big_graph(g: ConversationGraph) -> str:
    start(g)
    node = tool_round(g, [("Read", BIG)], prefix="c")
    g.append({"role": "assistant", "content": "read it"})
    return g.tools(node.id)[0].id


# -- records --------------------------------------------------------------------------


def test_offload_record_goes_to_jsonl_and_callbacks(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    tool_id = big_graph(g)
    seen: list[CompactionRecord] = []
    pol = policy(tmp_path)
    engine = ContextEngine(g, pol, budget=100_000, on_record=seen.append)
    rendered = engine.render()
    [record] = rendered.records
    assert record.tier == "offload"
    assert record.session == "s1"
    name = f"tool_results/s1/{tool_id}.txt"  # relative: the same on every host
    assert record.offloaded == [{"node": tool_id, "path": name, "chars": len(BIG)}]
    assert (state_of(g) / name).read_text() == BIG
    assert record.error is None
    assert record.messages_before == record.messages_after == 5
    assert record.tokens_after < record.tokens_before
    assert record.ratio == round(record.tokens_after / record.tokens_before, 4)
    assert seen == [record]

    file = records_path(state_of(g), "s1")
    assert file == engine.folder.path / "records" / "s1.jsonl"
    assert list(read_jsonl(file)) == [record]

    again = engine.render()
    assert again.records == []
    assert render_context(g, budget=100_000, policy=pol).records == []
    assert list(read_jsonl(file)) == [record]
    assert seen == [record]


def test_torn_last_line_is_skipped_and_the_next_record_starts_a_line(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    big_graph(g)
    pol = policy(tmp_path)
    [record] = render_context(g, budget=100_000, policy=pol).records
    file = records_path(state_of(g), "s1")
    with file.open("ab") as handle:
        handle.write(b'{"id": "torn", "sess')
    with pytest.warns(RuntimeWarning, match=r"s1.jsonl:2: skipping a line"):
        assert list(read_jsonl(file)) == [record]
    g.append({"role": "user", "content": "more"})
    tool_round(g, [("Read", BIG + "x")], prefix="d")
    [later] = render_context(g, budget=100_000, policy=pol).records
    with pytest.warns(RuntimeWarning, match=r"s1.jsonl:2: skipping a line"):
        assert list(read_jsonl(file)) == [record, later]


def test_a_bad_line_in_the_middle_is_skipped_with_a_warning(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    big_graph(g)
    pol = policy(tmp_path)
    [record] = render_context(g, budget=100_000, policy=pol).records
    file = records_path(state_of(g), "s1")
    good = file.read_bytes()
    file.write_bytes(good + b"not json\n" + good)
    with pytest.warns(RuntimeWarning, match=r"s1.jsonl:2: skipping a line"):
        assert list(read_jsonl(file)) == [record, record]
    assert list(read_jsonl(tmp_path / "missing.jsonl")) == []


def test_records_go_to_the_database(store_url: str, tmp_path: Path) -> None:
    g = ConversationGraph.open(store_url, session="s1")
    try:
        big_graph(g)
        seen: list[CompactionRecord] = []
        engine = ContextEngine(g, policy(tmp_path), budget=100_000, on_record=seen.append)
        [record] = engine.render().records
        assert engine.render().records == []
        assert engine.records() == [record]
        assert context.ContextStorage(g.store, "other", tmp_path).read_records() == []
        assert seen == [record]
        # A second engine (another process, say) re-renders without a new record.
        second = ContextEngine(g, policy(tmp_path), budget=100_000)
        assert second.render().records == []
        assert second.records() == [record]
    finally:
        g.close()


# -- offload fail-open ----------------------------------------------------------------


def test_offload_failure_keeps_the_output_inline(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    tool_id = big_graph(g)
    full = ContextEngine(g, policy(tmp_path), budget=1_000_000).preview()
    budget = full.tokens + 200
    with injected(faults := Faults(fail_at=0)):  # the offload's first write fails
        rendered = render_context(g, budget=budget, policy=policy(tmp_path))
    assert faults.fired is not None
    failure = f"node {tool_id}: [Errno 5] injected Input/output error in os.{faults.fired.kind}"
    assert rendered.fits
    assert tool_pair_problems(rendered.messages) == []
    content = rendered.messages[3]["content"]
    assert content.startswith(BIG[:2_400])
    assert content.endswith(BIG[-1_600:])
    assert (
        f'elided; page by page: read_output("{node_handle(g.get(tool_id))}", offset=2400)'
        in content
    )
    [failed] = [a for a in rendered.actions if a.tier == "offload"]
    assert failed.error is not None and failed.error.startswith(failure)
    assert [a.tier for a in rendered.actions] == ["offload", "budget_reduction"]
    [record, reduced] = rendered.records
    assert record.tier == "offload"
    assert record.error == failed.error
    assert record.offloaded == []
    assert reduced.tier == "budget_reduction" and reduced.details == {"reduced": [tool_id]}
    assert not (state_of(g) / "tool_results").exists()


def test_offload_failure_on_the_rename(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    big_graph(g)
    engine = ContextEngine(g, policy(tmp_path), budget=100_000)
    with injected(faults := Faults(kinds=("replace",), fail_at=0, mode="full")):
        rendered = engine.render()
    assert faults.fired is not None  # the rename of the written file into place
    assert rendered.fits
    assert "No space left on device in os.replace" in (rendered.records[0].error or "")
    # The failure is remembered: the next render neither retries nor records again.
    again = engine.render()
    assert again.messages == rendered.messages
    assert again.records == []


@pytest.mark.parametrize("error", [RuntimeError("summarizer down"), KeyError("bug")])
def test_a_failing_tier_is_recorded_and_the_render_continues(
    tmp_path: Path, error: Exception
) -> None:
    def broken(view: Any, ctx: Any) -> Any:
        raise error

    pol = policy(tmp_path)
    tiers = [context.Tier("snip", compact=broken) if t == "snip" else t for t in pol.cascade]
    assert "snip" in pol.cascade
    g = ConversationGraph.memory("s1")
    start(g)
    for i in range(10):
        g.append({"role": "user", "content": f"step {i}"})
        g.append({"role": "assistant", "content": "word " * 80})
    rendered = ContextEngine(g, pol, budget=300, tiers=tiers).render()
    assert rendered.fits
    assert tool_pair_problems(rendered.messages) == []
    failed = [a for a in rendered.actions if a.tier == "snip"]
    assert failed and failed[0].error == repr(error)
    assert [r.error for r in rendered.records if r.tier == "snip"] == [repr(error)]
    assert "emergency" in [a.tier for a in rendered.actions]


@pytest.mark.parametrize("bad", ["../x", "a/b", "..", "", "x\x00y", "/etc/passwd"])
def test_offload_refuses_escaping_ids(tmp_path: Path, bad: str) -> None:
    with pytest.raises(OffloadError):
        offload_path(tmp_path, bad, "N1")
    with pytest.raises(OffloadError):
        offload_path(tmp_path, "s1", bad)


def test_offload_path_is_inside_the_folder(tmp_path: Path) -> None:
    path = offload_path(tmp_path, "s1", "01ABC")
    assert path == tmp_path / "tool_results" / "s1" / "01ABC.txt"


# -- token cache ----------------------------------------------------------------------


def test_second_engine_loads_cached_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    g = ConversationGraph.open(tmp_path / "op.db", session="s1")
    try:
        start(g)
        for i in range(5):
            tool_round(g, [("Bash", f"out {i} " * 20)], prefix=f"c{i}")
        big_graph_round = tool_round(g, [("Read", BIG)], prefix="big")
        assert big_graph_round
        first = ContextEngine(g, policy(tmp_path), budget=100_000).render()

        calls: list[dict[str, Any]] = []
        original = TokenCounter.count_message

        def counting(self: TokenCounter, message: Any) -> int:
            calls.append(dict(message))
            return original(self, message)

        monkeypatch.setattr(TokenCounter, "count_message", counting)
        second = ContextEngine(g, policy(tmp_path), budget=100_000)
        rendered = second.render()  # stored counts are read as the units are built
        assert len(second.cache) > 0
        assert rendered.messages == first.messages
        assert rendered.tokens == first.tokens
        assert calls == []
    finally:
        g.close()


# -- idle microcompact ----------------------------------------------------------------


def test_idle_microcompact_clears_even_when_the_prompt_fits(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g)
    last = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
    for i in range(8):
        tool_round(g, [("Bash", f"output {i}" + " ok" * 100)], prefix=f"c{i}", at=last)
    pol = policy(tmp_path)

    busy = ContextEngine(g, pol, budget=100_000, clock=lambda: last + timedelta(minutes=59))
    assert busy.render().actions == []

    idle = ContextEngine(g, pol, budget=100_000, clock=lambda: last + timedelta(hours=2))
    rendered = idle.render()
    assert rendered.fits
    contents = [m["content"] for m in rendered.messages if m["role"] == "tool"]
    assert [c.startswith("[old Bash output cleared") for c in contents] == [True] * 3 + [False] * 5
    [record] = rendered.records
    assert record.tier == "microcompact"
    assert record.details == {"trigger": "idle", "cleared": 3}
    # Sticky: the next render keeps them cleared, without a new record.
    again = idle.render()
    assert again.messages == rendered.messages
    assert again.records == []


# -- public surface -------------------------------------------------------------------


def test_public_surface() -> None:
    assert sorted(context.__all__) == [
        "ANCHOR_TITLES",
        "Action",
        "Adoption",
        "AlreadyRolledBack",
        "Anchors",
        "BudgetFloorWarning",
        "COLLAPSE_FIRST_CASCADE",
        "CONTEXT_MIGRATIONS",
        "CommitConflict",
        "Committed",
        "CompactionRecord",
        "ContextEngine",
        "ContextError",
        "ContextOverflowError",
        "ContextStorage",
        "CopiedDatabase",
        "DEFAULT_COMPACTABLE",
        "ForeignStateFolder",
        "HISTORY_TOOLS",
        "HeuristicSummarizer",
        "Item",
        "LAYER_KINDS",
        "LAYER_TOTALS",
        "LayerFacts",
        "LayerKind",
        "LiteLLMSummarizer",
        "MAX_TOKENS",
        "MessageSource",
        "ModelInfo",
        "NoState",
        "OffloadError",
        "OffloadFile",
        "POLICY_SCHEMA",
        "Policy",
        "PolicyError",
        "ProviderUsage",
        "RESULT_VARIANTS",
        "RecordError",
        "RecordFacts",
        "RecordTier",
        "Removal",
        "RenderInputs",
        "RenderReceipt",
        "RenderRequest",
        "Rendered",
        "RollbackFacts",
        "ScrubRefused",
        "SentPrompt",
        "SessionWriter",
        "StateDirError",
        "StateFolder",
        "StateMigration",
        "Summarizer",
        "SummaryError",
        "SummaryRequest",
        "SummaryResult",
        "TIERS",
        "TIER_NAMES",
        "Tier",
        "TierContext",
        "TierDecisions",
        "TierName",
        "TierServices",
        "TierState",
        "TokenCache",
        "TokenCounter",
        "TokenizerError",
        "Unit",
        "UnknownLayer",
        "UnknownModel",
        "UsageAnchor",
        "Variant",
        "View",
        "adopt_state_folder",
        "anchors_from_dict",
        "as_layer_kind",
        "as_record_tier",
        "as_tier",
        "cache_schedule",
        "canonical_message",
        "collect_garbage",
        "cost_per_turn",
        "delete_session",
        "encoding_name_for",
        "equal_prefix",
        "import_litellm",
        "is_anthropic",
        "is_context_overflow",
        "message_digest",
        "middle_truncate",
        "migrate_state",
        "model_info",
        "model_map_path",
        "offload_path",
        "output_redactor",
        "parse_summary",
        "plan_for",
        "provider_request_options",
        "provider_roles",
        "rank_identifiers",
        "read_jsonl",
        "read_target",
        "records_path",
        "release_state_folder",
        "render_context",
        "render_receipt",
        "repair_tool_pairs",
        "reported_tokens",
        "resolve_tiers",
        "same_prefix",
        "scrub_session",
        "sent_prompt",
        "state_folder",
        "state_home",
        "summary_redactor",
        "tool_pair_problems",
        "tools_digest",
        "unique_call_ids",
        "write_target",
    ]
    for name in context.__all__:
        assert getattr(context, name) is not None
    namespace: dict[str, Any] = {}
    exec("from context import *", namespace)
    assert set(context.__all__) <= set(namespace)


def test_delete_session_removes_records_cache_and_offload_files(
    store_url: str, tmp_path: Path
) -> None:
    from context import ContextStorage, delete_session

    state = tmp_path / ".openprogram"
    g = ConversationGraph.open(store_url, session="doomed")
    g.append({"role": "user", "content": "task"})
    g.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
            ],
        }
    )
    g.append({"role": "tool", "tool_call_id": "c1", "content": "line\n" * 5_000})
    rendered = ContextEngine(g, context.Policy(), budget=20_000, state_dir=state).render()
    assert [r.tier for r in rendered.records] == ["offload"]
    assert (state / "tool_results" / "doomed").is_dir()
    assert len(ContextStorage(g.store, "doomed", state).read_records()) == 1

    delete_session(g.store, "doomed", state)

    assert not (state / "tool_results" / "doomed").exists()
    assert not (state / "records" / "doomed.jsonl").exists()
    assert ContextStorage(g.store, "doomed", state).read_records() == []
    assert g.store.get_values("doomed", "context.state") == {}
    assert "doomed" not in [s.id for s in g.store.sessions()]
