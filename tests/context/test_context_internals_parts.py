"""The cascade's parts run alone, on inputs built to sit at their edges: the backlog's
chunking and sampling, the collapse payoff rule, the emergency cut, the clip and the bound
on a summary request, and the tokenizer's loading (made to fail)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from _context_helpers import policy
from _layer_helpers import NOW
from hypothesis import given, settings
from hypothesis import strategies as st

from context import (
    ContextEngine,
    Item,
    Policy,
    RenderInputs,
    TierContext,
    TierServices,
    TokenCache,
    TokenCounter,
    TokenizerError,
    Unit,
    tool_pair_problems,
)

# internal: these parts have no entry point of their own; an engine only shows their sum
from context._budget import _tokens
from context._render._backlog import MAX_REQUESTS, _chunks
from context._tiers._collapse import pays
from context._tiers._emergency import _cut
from context._tiers._summarizing import (
    MIN_ITEM_CHARS,
    SUMMARY_TEXT_CHARS,
    _clipped,
    bounded,
    sampled,
)
from graph import ConversationGraph, node_handle


def texts(units: tuple[Unit, ...]) -> list[str]:
    return [str(item.message.get("content") or "") for unit in units for item in unit.items]


@given(st.lists(st.integers(1, 5_000), min_size=1, max_size=400), st.integers(100, 20_000))
def test_chunks_cover_the_span_in_order_within_the_request_count(
    sizes: list[int], bound: int
) -> None:
    parts = _chunks(sizes, bound)
    assert 1 <= len(parts) <= MAX_REQUESTS
    assert [i for part in parts for i in part] == list(range(len(sizes)))


@given(st.lists(st.integers(1, 5_000), min_size=1, max_size=400), st.integers(100, 20_000))
def test_a_sample_stays_within_its_bound_and_keeps_the_newest_that_fits(
    sizes: list[int], bound: int
) -> None:
    part = range(len(sizes))
    chosen = sampled(part, sizes, bound)
    assert chosen == sorted(set(chosen)) and all(i in part for i in chosen)
    assert chosen, "a request never covers nothing"
    read = sum(sizes[i] for i in chosen)
    assert read <= max(bound, sum(sizes)) and (
        sum(sizes) <= bound or read <= bound or chosen == [len(sizes) - 1]
    )
    if sizes[-1] <= bound // 2:
        assert chosen[-1] == len(sizes) - 1


def _context(**overrides: object) -> TierContext:
    g = ConversationGraph.memory("ctx")
    return TierContext(
        RenderInputs(g, Policy(**overrides), NOW),
        TierServices(TokenCounter(), TokenCache()),
        10_000,
    )


texts_strategy = st.lists(
    st.tuples(st.integers(0, 30_000), st.integers(0, 20_000), st.booleans()),
    min_size=1,
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(sizes=texts_strategy, limit=st.sampled_from([None, 1_000, 5_000, 20_000]))
def test_bounded_keeps_pairing_ends_and_the_bound(
    sizes: list[tuple[int, int, bool]], limit: int | None
) -> None:
    ctx = _context(summary_request_tokens=limit)
    units = []
    for i, (said, argument, failed) in enumerate(sizes):
        arguments = json.dumps({"command": "x" * argument, "timeout": 5})
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "Bash", "arguments": arguments},
        }
        output = ("E: failed\n" if failed else "ok\n") + "y" * said + "\nend of output"
        items = (
            Item({"role": "assistant", "content": f"step {i}", "tool_calls": [call]}, 1, f"a{i}"),
            Item({"role": "tool", "tool_call_id": f"c{i}", "content": output}, 1, f"t{i}", "Bash"),
        )
        units.append(Unit(items, "round", i, node_ids=(f"a{i}", f"t{i}")))
    whole = tuple(units)
    sent = bounded(whole, ctx)
    messages = [item.message for unit in sent for item in unit.items]
    assert not tool_pair_problems(messages)
    assert sent, "a request never covers nothing"
    positions = [unit.position for unit in sent]
    assert positions == sorted(set(positions)) and positions[-1] == whole[-1].position
    shown = tuple(whole[p] for p in positions)  # units still over the bound are sampled
    bound = ctx.policy.summary_item_chars
    for short, original in zip(texts(sent), texts(shown), strict=True):
        assert len(short) <= max(len(original), bound + 120)
        assert short[: MIN_ITEM_CHARS // 2] == original[: MIN_ITEM_CHARS // 2]
        assert short.endswith(original[-(MIN_ITEM_CHARS // 3) :])
    for unit in sent:
        arguments = json.loads(unit.items[0].message["tool_calls"][0]["function"]["arguments"])
        assert arguments["timeout"] == 5 and len(arguments["command"]) <= bound + 120
    total = ctx.policy.summary_request_bound(ctx.budget)
    assert total == min(limit or 10**9, 2_000)  # a fifth of the 10k budget, if less
    used = ctx.counter.count_messages(messages)
    newest = ctx.counter.count_messages(item.message for item in sent[-1].items)
    assert used <= max(total, newest)
    if len(sent) < len(whole):  # sampled only when the least text bound was not enough
        unbounded = {"summary_request_tokens": None, "summary_request_share": None}
        at_floor = bounded(whole, _context(summary_item_chars=MIN_ITEM_CHARS, **unbounded))
        floor = ctx.counter.count_messages(i.message for u in at_floor for i in u.items)
        assert floor > total


def test_emergency_never_offers_read_output_for_a_layer_s_text() -> None:
    """A compaction's summary is shown under the layer's id; cut by emergency, it must not
    offer ``read_output`` on that id (no node has it: the replayed cd trace at a 2,000-token
    budget did, once compaction replaced collapse in the preset)."""
    g = ConversationGraph.memory("cut")
    g.append({"role": "user", "content": "task"})
    node = g.append({"role": "user", "content": "x" * 5_000})
    ctx, _, _ = ContextEngine(g, Policy(), budget=1_000).context()
    layer_text = Item({"role": "user", "content": "y" * 5_000}, 1_250, "00000000FF667VXMWZHY7RBY6P")
    assert "read_output" not in str(_cut(layer_text, {-1: 400}, ctx).message["content"])
    own = Item({"role": "user", "content": "x" * 5_000}, 1_250, node.id)
    assert f'read_output("{node_handle(node)}", offset=240)' in str(
        _cut(own, {-1: 400}, ctx).message["content"]
    )


def test_a_summary_pays_at_its_boundary(tmp_path: Path) -> None:
    """Summarizing 1,000 tokens pays when it saves ``payoff_share`` (0.3) of them."""
    ctx: Any = SimpleNamespace(policy=policy(tmp_path))
    assert ctx.policy.payoff_share == 0.3
    assert pays(ctx, 1_000, 700) and not pays(ctx, 1_000, 701)


def test_a_huge_output_reaches_a_summarizer_clipped(tmp_path: Path) -> None:
    class Handles:
        """The one thing the clip asks of a render: how the prompt names a node."""

        def handle(self, node_id: str) -> str:
            return {"N1": "n7"}[node_id]

    text = "a" * (SUMMARY_TEXT_CHARS * 3)
    item = Item({"role": "tool", "content": text, "tool_call_id": "c"}, 10, "N1")
    clipped = _clipped(item, Handles()).message["content"]  # type: ignore[arg-type]
    assert len(clipped) < SUMMARY_TEXT_CHARS + 200
    assert (
        clipped.startswith("a" * 1000)
        and 'characters elided; page by page: read_output("n7"' in clipped
    )
    assert os.path.sep not in clipped


def test_encodings_are_loaded_once() -> None:
    assert _tokens._load("cl100k_base") is _tokens._load("cl100k_base")


def _only_bogus(monkeypatch: pytest.MonkeyPatch) -> None:
    real = _tokens._load

    def load(name: str) -> Any:
        return None if name == "cl100k_base" else real(name)

    monkeypatch.setattr(_tokens, "_load", load)


def test_approximate_when_nothing_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    _only_bogus(monkeypatch)
    counter = TokenCounter(encoding="no-such-encoding")
    assert counter.approximate
    assert counter.encoding_name == "no-such-encoding"
    assert counter.count_text("") == 0
    assert counter.count_text("abcd") == 1
    assert counter.count_text("abcde") == 2  # ceil(5 / 4)
    assert counter.count_message({"role": "user", "content": "x" * 40}) == 4 + 10


def test_strict_raises_when_nothing_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    _only_bogus(monkeypatch)
    with pytest.raises(TokenizerError, match="no-such-encoding"):
        TokenCounter(encoding="no-such-encoding", strict=True)


def test_a_lazy_counter_loads_its_encoding_on_the_first_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loaded: list[str] = []
    real = _tokens._load

    def load(name: str) -> Any:
        loaded.append(name)
        return real(name)

    monkeypatch.setattr(_tokens, "_load", load)
    counter = TokenCounter(encoding="no-such-encoding", lazy=True)
    assert loaded == [] and counter.encoding_name == "no-such-encoding"
    assert counter.count_text("hello world") == 2  # counted with the fallback encoding
    assert loaded == ["no-such-encoding", "cl100k_base"]
    assert counter.encoding_name == "no-such-encoding"  # its counts stay under its name
    assert not counter.approximate


def test_a_lazy_strict_counter_raises_on_the_first_count(monkeypatch: pytest.MonkeyPatch) -> None:
    _only_bogus(monkeypatch)
    counter = TokenCounter(encoding="no-such-encoding", strict=True, lazy=True)
    with pytest.raises(TokenizerError):
        counter.count_text("abcd")
