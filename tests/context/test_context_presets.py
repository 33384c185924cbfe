"""Presets, models, ``OPENPROGRAM_*`` overrides and budgets; a progressive session."""

from __future__ import annotations

from pathlib import Path

import pytest
from _layer_helpers import clock, session

from context import (
    ANCHOR_TITLES,
    ContextEngine,
    ContextError,
    Policy,
    PolicyError,
    render_context,
    tool_pair_problems,
)
from graph import ConversationGraph


@pytest.fixture(autouse=True)
def _no_policy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defaults under test must not depend on the caller's shell."""
    import os

    for variable in list(os.environ):
        if variable.startswith("OPENPROGRAM_") and variable != "OPENPROGRAM_TEST_PG_URL":
            monkeypatch.delenv(variable)


# -- presets --------------------------------------------------------------------------


def test_the_claude_code_preset() -> None:
    p = Policy.claude_code()
    assert p == Policy() == Policy.named("claude-code")
    assert p.fingerprint == Policy().fingerprint
    assert p.name == "claude-code" and p.model is None
    assert p.cascade == (
        "offload",
        "rereads",
        "microcompact",
        "compact",
        "collapse",
        "budget_reduction",
        "snip",
        "emergency",
    )
    assert p.always == ("offload",) and p.triggers == {}
    assert [p.trigger(t) for t in p.cascade] == [0.0] + [1.0] * 7
    assert p.context_window == 128_000 and p.max_output_tokens == 16_384
    assert p.budget == 128_000 - 16_384 - 12_800  # the buffer is at most a tenth
    assert p.offload_chars == 20_000 and p.low_water == 0.75
    assert p.target(p.budget) == 24_000 and p.target(10_000) == 7_500
    # in a large window, compaction starts at 80k and a long output stays whole
    assert p.threshold("compact", p.budget) == 80_000
    assert p.threshold("compact", 32_000) == p.threshold("snip", 32_000) == 32_000
    assert p.offloads(30_000, 9_000, 32_000) and not p.offloads(30_000, 9_000, 98_816)
    assert not p.offloads(19_000, 9_000, 32_000)
    # an output up to a quarter of the budget stays whole; old ones are cleared first, as a
    # batch, whenever the prompt is over budget; a summary request is bounded
    assert not p.offloads(30_000, 7_900, 32_000)
    assert (p.microcompact_first, p.microcompact_every, p.microcompact_keep) == (1, 1, 5)
    assert (p.summary_item_chars, p.summary_request_tokens) == (2_000, 6_000)


def test_the_progressive_preset() -> None:
    p = Policy.progressive()
    assert p == Policy.named("progressive")
    assert p.name == "progressive"
    assert p.cascade == ("offload", "summarize_half", "compact", "emergency")
    assert p.always == ()
    assert p.triggers == {"offload": 0.6, "summarize_half": 0.7, "compact": 0.8, "emergency": 0.95}
    assert [p.trigger(t) for t in p.cascade] == [0.6, 0.7, 0.8, 0.95]
    assert p.offload_chars == 4_000 and p.compact_keep_messages == 6
    assert p.offload_share is None and p.compact_tokens is None  # the seed's ratios alone
    assert p.buffer_tokens == 0 and p.budget == 128_000 - 16_384
    assert p.fingerprint != Policy().fingerprint
    assert Policy.progressive(offload_chars=9_000).offload_chars == 9_000  # overrides win
    assert p.compact_min_fresh_share == 0.3 and Policy().compact_min_fresh_share is None
    # identifier lists a 40th of the budget from 32k up (recall at 32k on TUNE), as before under it
    assert [p.identifier_cap(b) for b in (8_000, 16_000, 32_000)] == [400, 400, 800]
    assert [Policy().identifier_cap(b) for b in (8_000, 16_000, 32_000)] == [400, 400, 400]


def test_offload_tokens_caps_the_share_of_a_large_budget() -> None:
    """An output offloads over ``offload_share`` of the budget or ``offload_tokens`` (16k by
    default), if fewer: the cap acts only in a large window."""
    share_only, capped = Policy(offload_tokens=None), Policy()
    chars = 100_000  # over offload_chars
    assert not share_only.offloads(chars, 20_000, 160_000)
    assert capped.offloads(chars, 20_000, 160_000)
    assert not capped.offloads(chars, 15_000, 160_000)
    for policy in (share_only, capped):  # 32k: a quarter is 8k, under the cap
        assert policy.offloads(chars, 9_000, 32_000) and not policy.offloads(chars, 7_000, 32_000)
        assert not policy.offloads(Policy().offload_chars, 50_000, 160_000)  # short text stays
    assert Policy(offload_share=None, offload_tokens=16_000).offloads(chars, 10, 160_000)


def test_a_tight_budget_offloads_outputs_over_its_own_size_in_characters() -> None:
    """Under ``offload_chars`` of budget (20k), an output offloads over as many characters as
    the budget has tokens (``offload_chars_per_token``): at 8k a 3k-token output of 9k
    characters was kept whole, half the prompt."""
    assert Policy().offloads(9_000, 3_000, 8_000)
    assert not Policy(offload_chars_per_token=None).offloads(9_000, 3_000, 8_000)
    assert not Policy().offloads(7_000, 3_000, 8_000)  # under 8k characters: whole
    assert not Policy().offloads(19_000, 9_000, 32_000)  # 32k: the 20k characters bind
    with pytest.raises(PolicyError, match="offload_chars_per_token"):
        Policy(offload_chars_per_token=0)


def test_a_toy_budget_still_keeps_modest_outputs_whole() -> None:
    """The per-token floor stops at ``offload_chars_min`` (8k characters): at a 2k budget a
    5k-character output is kept, not turned into a pointer to read back."""
    assert not Policy().offloads(5_000, 1_500, 2_000)
    assert Policy(offload_chars_min=4_000).offloads(5_000, 1_500, 2_000)
    assert Policy().offloads(9_000, 1_500, 2_000)


def test_presets_take_a_model_and_overrides() -> None:
    p = Policy.claude_code("gpt-3.5-turbo", low_water=0.5)
    assert p.model == "gpt-3.5-turbo" and p.context_window == 16_385 and p.low_water == 0.5
    assert Policy.named("progressive", "gpt-3.5-turbo").context_window == 16_385
    with pytest.raises(PolicyError, match="unknown policy 'aggressive'; presets: claude-code"):
        Policy.named("aggressive")


def test_a_model_sets_the_window() -> None:
    p = Policy(model="gpt-3.5-turbo")
    assert p.context_window == 16_385
    assert p.max_output_tokens == 4_096
    assert p.budget == 16_385 - 4_096 - 1_638
    assert Policy(model="gpt-3.5-turbo", context_window=8_000).context_window == 8_000


def test_an_unknown_model_raises_a_policy_error() -> None:
    with pytest.raises(PolicyError, match="no-such-model-xyz") as caught:
        Policy(model="no-such-model-xyz")
    assert isinstance(caught.value, ContextError) and isinstance(caught.value, ValueError)
    with pytest.raises(PolicyError):
        Policy.claude_code("no-such-model-xyz")


def test_bad_values_name_the_field() -> None:
    with pytest.raises(PolicyError, match="low_water"):
        Policy(low_water=0)
    with pytest.raises(PolicyError, match="unknown tier"):
        Policy(cascade=("offload", "magic"))
    with pytest.raises(PolicyError, match="triggers must be shares"):
        Policy(triggers={"snip": 1.5})
    with pytest.raises(PolicyError, match="max_output_tokens must be smaller"):
        Policy(context_window=1_000, max_output_tokens=1_000)


# -- environment overrides ------------------------------------------------------------


def test_an_environment_value_changes_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENPROGRAM_SNIP_LOW_WATER", "0.5")
    assert Policy().snip_low_water == 0.5
    assert Policy.claude_code().snip_low_water == 0.5
    assert Policy.progressive().snip_low_water == 0.5
    assert Policy(snip_low_water=0.4).snip_low_water == 0.4  # given in code: it wins
    assert Policy.claude_code(snip_low_water=0.3).snip_low_water == 0.3
    monkeypatch.setenv("OPENPROGRAM_WORKING_TOKENS", "null")
    assert Policy().working_tokens is None
    monkeypatch.setenv("OPENPROGRAM_CACHE_EDITS", "on")
    assert Policy().cache_edits == "on"
    monkeypatch.setenv("OPENPROGRAM_STATE_DIR", "/tmp/somewhere")  # not a setting any more:
    assert "state_dir" not in Policy().model_dump()  # the state folder is the database's


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("OPENPROGRAM_SNIP_LOW_WATER", "abc", "OPENPROGRAM_SNIP_LOW_WATER='abc' is not a valid"),
        ("OPENPROGRAM_SNIP_LOW_WATER", "1.5", "snip_low_water"),
        ("OPENPROGRAM_CONTEXT_WINDOW", "32k", "OPENPROGRAM_CONTEXT_WINDOW='32k'"),
        ("OPENPROGRAM_CACHE_EDITS", "sometimes", "cache_edits"),
        ("OPENPROGRAM_MODEL", "no-such-model-xyz", "no-such-model-xyz"),
    ],
)
def test_a_bad_environment_value_raises_a_policy_error(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(PolicyError, match=message):
        Policy()


def test_collections_are_not_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENPROGRAM_CASCADE", "not json at all")
    monkeypatch.setenv("OPENPROGRAM_TRIGGERS", "{broken")
    assert Policy() == Policy.claude_code()


# -- budgets --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "budget",
    [0, -1, 1.5, True, False, "1000", 2.0, 10**16, 10**400, None],
    ids=["0", "-1", "1.5", "true", "false", "text", "2.0", "1e16", "1e400", "window"],
)
def test_a_bad_budget_raises_a_policy_error(tmp_path: Path, budget: object) -> None:
    g = ConversationGraph.memory("s1")
    g.append({"role": "user", "content": "hi"})
    pol = Policy()
    if budget is None:  # a policy whose window and reserve leave a bad budget
        with pytest.raises(PolicyError):
            Policy(context_window=10**400)
        return
    with pytest.raises(PolicyError, match="budget must be"):
        ContextEngine(g, pol, budget=budget)  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="budget must be"):
        render_context(g, budget=budget, policy=pol)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "field",
    ["context_window", "max_output_tokens", "buffer_tokens", "offload_chars", "working_tokens"],
)
@pytest.mark.parametrize(
    "value",
    [True, "1000", 2.0, -1, 10**400, 10**5000],
    ids=["true", "text", "float", "negative", "1e400", "1e5000"],
)
def test_a_count_that_is_not_an_int_raises_a_policy_error(field: str, value: object) -> None:
    """Before: ``True``, ``"1000"`` and ``2.0`` were read as 1, 1000 and 2 (pydantic's lax
    mode), and a window of 10**400 overflowed a float at the first render."""
    with pytest.raises(PolicyError, match=field) as caught:
        Policy(**{field: value})
    assert len(str(caught.value)) < 300


def test_the_largest_budget_renders(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    g.append({"role": "user", "content": "hi"})
    pol = Policy(context_window=10**15, max_output_tokens=0)
    assert ContextEngine(g, pol).render().fits
    assert ContextEngine(g, Policy(), budget=10**15).render().fits


def test_the_budget_defaults_to_the_policys(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    g.append({"role": "user", "content": "hi"})
    pol = Policy(model="gpt-3.5-turbo")
    assert ContextEngine(g, pol).budget == pol.budget
    assert ContextEngine(g, pol, budget=1).budget == 1


# -- a progressive session --------------------------------------------------------------


def test_a_progressive_session_stays_under_budget_with_anchored_layers(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    session(g, 20)
    pol = Policy.progressive()
    full = ContextEngine(g, pol, budget=1_000_000, clock=clock).render().tokens
    budget = full // 2 + 1_000
    e = ContextEngine(g, pol, budget=budget, clock=clock)
    for turn in range(25):
        rendered = e.render()
        assert rendered.fits, (turn, rendered.tokens)
        assert tool_pair_problems(rendered.messages) == []
        assert rendered.messages[0] == {"role": "system", "content": "You are terse."}
        assert rendered.messages[1] == {"role": "user", "content": "Fix the bug."}
        session(g, 1 if turn % 8 else 6, first=100 + turn * 10)
    records = [r for r in e.records() if r.tier in ("summarize_half", "compact")]
    assert {r.tier for r in records} == {"summarize_half", "compact"}
    assert all(r.error is None for r in records)
    for record in records:
        assert record.anchors is not None and set(record.anchors) == set(ANCHOR_TITLES)
        assert record.anchors["user_intent"] != ["N/A"]
        info = e.layer(record.details["layer"])
        assert info.kind == "compact"
    layers = e.layers()
    assert layers and all(i.active for i in layers)
    assert all(i.builds_on for i in layers[1:])  # each builds on the one before
    # The newest messages stay as they were (progressive keeps the last six).
    last = e.render()
    assert last.fits and last.messages[-6:] == g.to_openai()[-6:]
