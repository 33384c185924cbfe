"""Regression tests for bugs found while writing the context engine II suite, one each."""

from __future__ import annotations

from pathlib import Path

import pytest
from _context_helpers import policy
from _layer_helpers import clock, session

from context import ContextEngine, HeuristicSummarizer, SummaryRequest, SummaryResult
from graph import ConversationGraph, layer_handle


class _Spy(HeuristicSummarizer):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls += 1
        return super().summarize(request)


def test_a_rolled_back_collapse_made_again_reuses_the_stored_summary(tmp_path: Path) -> None:
    # The reuse lookup compared a "summary_key" that no layer ever stored with "", so a
    # stored summary was never found and the summarizer was asked again.
    g = ConversationGraph.memory("s1")
    ids = session(g, 10)
    spy = _Spy()
    e = ContextEngine(g, policy(tmp_path), spy, 1_000_000, clock=clock)
    first = e.collapse(ids[1][0], ids[6][1])
    e.rollback(first.id)
    again = e.collapse(ids[1][0], ids[6][1])
    assert spy.calls == 1
    assert again.layer.meta["summary"] == first.layer.meta["summary"]


def test_a_summary_without_a_summarizer_name_is_named_and_reused(tmp_path: Path) -> None:
    # A third-party summarizer may leave SummaryResult.summarizer empty: records showed
    # an empty name, and reuse (which matches the name) never found its summaries.
    from _layer_helpers import Counting

    g = ConversationGraph.memory("s1")
    ids = session(g, 10)
    counting = Counting()
    e = ContextEngine(g, policy(tmp_path), counting, 1_000_000, clock=clock)
    first = e.collapse(ids[1][0], ids[6][1])
    assert e.records()[-1].details["summarizer"]["name"] == "counting"
    assert first.layer.meta["summary"]["summarizer"] == "counting"
    e.rollback(first.id)
    e.collapse(ids[1][0], ids[6][1])
    assert len(counting.calls) == 1


def test_a_layer_kept_in_memory_has_the_id_its_banner_names(tmp_path: Path) -> None:
    # On a read-only graph (and in a preview) a layer lives in memory; it was given a
    # fresh id, so the expand_layer("...") its summary names raised UnknownLayer.
    import json
    import re

    g = ConversationGraph.memory("s1")
    session(g, 24)
    e = ContextEngine(g.at(g.last_seq), policy(tmp_path), budget=4_000, clock=clock)
    rendered = e.render()
    text = "\n".join(str(m["content"]) for m in rendered.messages)
    named = re.findall(r'expand_layer\("([^"]+)"\)', text)
    assert named and named == [layer_handle(i) for i in e.layers()]  # by handle (L1, L2)
    ids = [e.layer(handle).id for handle in named]
    assert [r.details["layer"] for r in rendered.records if r.tier == "collapse"] == ids
    for layer_id in named:
        assert e.expand(layer_id)
    live = ContextEngine(g, policy(tmp_path / "live"), budget=4_000, clock=clock)
    preview = live.preview()
    shown = re.findall(
        r'expand_layer\("([^"]+)"\)', json.dumps(preview.messages).replace('\\"', '"')
    )
    made = [r.details["layer"] for r in preview.records if r.tier == "collapse"]
    assert made and shown == [f"L{k}" for k in range(1, len(made) + 1)]


def test_summarize_half_records_and_acts_under_its_own_name(tmp_path: Path) -> None:
    # compact_span wrote "compact" on every action and record, so progressive's soft step
    # (summarize_half, from 70% of the budget) looked like a full compaction.
    from context import Policy

    g = ConversationGraph.memory("s1")
    session(g, 16)
    pol = Policy.progressive()
    full = ContextEngine(g, pol, budget=1_000_000, clock=clock).render().tokens
    budget = int(full / 0.75)  # over summarize_half's 0.7, under compact's 0.8
    rendered = ContextEngine(g, pol, budget=budget, clock=clock).render()
    assert [r.tier for r in rendered.records] == ["summarize_half"]
    assert [a.tier for a in rendered.actions] == ["summarize_half"]


def test_presets_read_the_model_from_the_environment_when_not_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The presets passed model=None explicitly, which counts as "given in code", so
    # OPENPROGRAM_MODEL was honoured by Policy() but ignored by Policy.claude_code().
    from context import Policy

    monkeypatch.setenv("OPENPROGRAM_MODEL", "gpt-3.5-turbo")
    assert Policy().context_window == 16_385
    assert Policy.claude_code() == Policy()
    assert Policy.named("claude-code").model == "gpt-3.5-turbo"
    assert Policy.progressive().context_window == 16_385
    assert Policy.claude_code("gpt-4o").model == "gpt-4o"  # an argument still wins


def test_offloading_never_grows_the_prompt(tmp_path: Path) -> None:
    # With offload_chars under the preview's head + tail, an output between the two was
    # "offloaded" whole, plus a header: offload made the prompt longer. The preview now
    # shrinks to half of offload_chars when it would not be shorter.
    from context import Policy

    assert Policy(offload_chars=1_000).offload_preview == (300, 200)
    assert Policy().offload_preview == (2_400, 1_600)
    pol = policy(tmp_path, offload_chars=1_000)
    g = ConversationGraph.memory("s1")
    session(g, 3, words=90)  # ~2,000-character outputs
    rendered = ContextEngine(g, pol, budget=1_000_000, clock=clock).render()
    [action] = [a for a in rendered.actions if a.tier == "offload"]
    assert action.tokens_after < action.tokens_before


def test_a_rolled_back_compaction_made_again_reuses_its_summary(tmp_path: Path) -> None:
    # Only collapse looked for a stored summary; a compaction over the same nodes (the
    # budget redoing a rolled-back one, or /compact again) asked the summarizer again.
    from _layer_helpers import AUTO_COMPACT, Counting

    g = ConversationGraph.memory("s1")
    session(g, 12)
    counting = Counting()
    pol = policy(tmp_path, cascade=AUTO_COMPACT)
    e = ContextEngine(g, pol, counting, 1_000_000, clock=clock)
    first = e.compact(focus="the parser")
    e.rollback(first.id)
    again = e.compact(focus="the parser")
    assert len(counting.calls) == 1
    assert again.covers == first.covers
    assert again.layer.meta["summary"] == first.layer.meta["summary"]
    e.rollback(again.id)
    e.compact(focus="something else")  # another focus is another summary
    assert len(counting.calls) == 2

    budget = ConversationGraph.memory("s2")
    session(budget, 20)
    counting = Counting()
    full = ContextEngine(budget, pol, counting, 1_000_000, clock=clock).render().tokens
    e = ContextEngine(budget, pol, counting, int(full * 0.6), clock=clock)
    e.render()
    [layer] = budget.layers()
    e.rollback(layer.id)
    assert e.render().fits
    assert len(counting.calls) == 1


def test_a_preview_leaves_no_token_counts_for_the_next_render_to_write(tmp_path: Path) -> None:
    # A preview counted into the engine's shared cache and marked the counts new, so the
    # next real render persisted them, counts of layers that never existed included.
    g = ConversationGraph.open(tmp_path / "op.db", session="s1")
    try:
        session(g, 24)
        e = ContextEngine(g, policy(tmp_path), budget=4_000, clock=clock)
        namespace = f"context.tokens.{e.counter.encoding_name}"
        preview = e.preview()
        shown = [r.details["layer"] for r in preview.records if r.tier == "collapse"]
        assert shown and g.store.get_values("s1", namespace) == {}
        e.render()
        stored = g.store.get_values("s1", namespace)
        made = {info.id for info in g.layers()}
        assert set(shown) <= made  # layer ids follow from what they cover: the same layers
        assert not [k for k in stored if k.split(":")[0] not in made and k.split(":")[0] not in g]
    finally:
        g.close()


@pytest.mark.parametrize("tier", ["collapse", "summarize_half"])
def test_a_summary_that_is_no_shorter_is_not_asked_for_again(tmp_path: Path, tier: str) -> None:
    # When the summary was no shorter than what it would replace, no layer was made and
    # nothing remembered it: every later render over the trigger asked the summarizer
    # about the same unchanged rounds again (found by the layer property tests).
    from _context_helpers import start
    from _layer_helpers import Counting

    from context import Policy

    g = ConversationGraph.memory("s1")
    start(g)
    for i in range(12):
        g.append({"role": "user", "content": f"s{i}"})
        g.append({"role": "assistant", "content": f"ok{i}"})
    g.append({"role": "user", "content": "please " * 400})
    counting = Counting()
    pol = Policy(
        cascade=(tier, "emergency"),
        always=(),
        collapse_keep_recent=1,
    )
    e = ContextEngine(g, pol, counting, budget=500, clock=clock)
    for _ in range(3):
        rendered = e.render()
        assert rendered.fits and g.layers() == []
    assert counting.calls and len(set(counting.calls)) == len(counting.calls)


def test_emergency_drops_a_compaction_that_cannot_fit(tmp_path: Path) -> None:
    # A compaction layer is pinned, so emergency could only cut it: under a small budget
    # the layer (with the user messages it keeps verbatim) stayed over budget although
    # the core (system prompt, task, newest round) fit (found by the property tests).
    from _context_helpers import start, tool_round

    from context import Policy

    g = ConversationGraph.memory("s1")
    start(g)
    for i in range(16):
        ask = (
            f"please also check module_{i} and its tests, then report every failure you find there"
        )
        g.append({"role": "user", "content": ask})
        tool_round(g, [("Bash", f"test_{i} failed\n" * 200)], prefix=f"c{i}", content="ok")
    g.append({"role": "user", "content": "now fix them"})
    pol = Policy.progressive()
    rendered = ContextEngine(g, pol, budget=250, clock=clock).render()
    assert rendered.fits, [a.what for a in rendered.actions]
    assert rendered.messages[-1] == {"role": "user", "content": "now fix them"}
    # Either no compaction was made (one that cannot leave room under the low-water mark
    # is not), or emergency left it out of this prompt; the layers themselves stay.
    dropped = [a.what for a in rendered.actions if "compaction(s)" in a.what]
    compactions = [layer for layer in g.layers() if layer.kind == "compact"]
    assert dropped or not compactions


def test_rounds_of_a_rolled_back_collapse_are_not_collapsed_in_another_segment(
    tmp_path: Path,
) -> None:
    # The budget skipped only a segment with exactly the rolled-back layer's nodes: once
    # more rounds moved the segment boundaries, it collapsed the same rounds again in
    # segments of another shape.
    g = ConversationGraph.memory("s1")
    session(g, 16)
    full = ContextEngine(g, policy(tmp_path / "probe"), budget=1_000_000, clock=clock)
    budget = int(full.render().tokens * 0.9)
    e = ContextEngine(g, policy(tmp_path), budget=budget, clock=clock)
    e.render()
    [layer] = g.layers()
    e.rollback(layer.id)
    for turn in range(4):
        session(g, 1, first=16 + turn)
        assert e.render().fits
    for info in g.layers(active=True):
        assert set(info.covers).isdisjoint(layer.covers)


def test_a_manual_collapse_over_a_compaction_says_so(tmp_path: Path) -> None:
    # A compaction layer is pinned, and the refusal called it "the system prompt or the
    # task" with the id of a node it covers.
    from _layer_helpers import AUTO_COMPACT

    from context import ContextError

    g = ConversationGraph.memory("s1")
    ids = session(g, 12)
    e = ContextEngine(g, policy(tmp_path, cascade=AUTO_COMPACT), budget=1_000_000, clock=clock)
    compaction = e.compact()
    session(g, 8, first=12)
    with pytest.raises(
        ContextError, match=f"cannot collapse a compaction \\(layer {compaction.id}\\)"
    ):
        e.collapse(ids[0][0], g.nodes()[-1].id)


def test_reported_tokens_leave_out_the_completion_a_request_reserved(tmp_path: Path) -> None:
    # OpenAI's "you requested N tokens (M in the messages, K in the completion)" counts
    # the completion too; the usage anchor learned from N as if it were the prompt.
    from context import reported_tokens

    text = (
        "This model's maximum context length is 128000 tokens. However, you requested "
        "130500 tokens (120500 in the messages, 10000 in the completion). Please reduce "
        "the length of the messages or completion."
    )
    assert reported_tokens(ValueError(text)) == (120_500, 128_000)
    with_functions = (
        "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 9000 tokens (8500 in the messages, 500 in the functions)."
    )
    assert reported_tokens(ValueError(with_functions)) == (9_000, 8_192)
    g = ConversationGraph.memory("s1")
    session(g, 20)
    e = ContextEngine(g, policy(tmp_path), budget=8_000, clock=clock)
    estimate = e.render().tokens
    prompt = estimate + 100
    e.recover(
        ValueError(text.replace("130500", str(prompt + 10_000)).replace("120500", str(prompt)))
    )
    assert e.anchor.ratio == pytest.approx(prompt / estimate)


def test_a_range_the_graph_refuses_raises_a_context_error(tmp_path: Path) -> None:
    # A layer that does not apply to this walk (it splits rounds) but that the range holds
    # only in part made the graph refuse; the graph's LayerError came out of the engine's
    # collapse() and compact() as is, not as the ContextError they document.
    from context import ContextError
    from graph import LayerError

    g = ConversationGraph.memory("s1")
    ids = session(g, 20)
    other = g.add_layer("provider", [ids[5][1], ids[6][0]], [{"role": "user", "content": "x"}])
    e = ContextEngine(g, policy(tmp_path), budget=1_000_000, clock=clock)
    with pytest.raises(ContextError, match=f"overlaps layer {other.id} only in part") as caught:
        e.collapse(ids[2][0], ids[5][1])
    assert isinstance(caught.value.__cause__, LayerError)
    # The compaction keeps the newest two rounds: a layer over their border is split.
    border = g.add_layer("provider", [ids[17][1], ids[18][0]], [{"role": "user", "content": "y"}])
    with pytest.raises(ContextError, match=f"compaction refused: .*layer {border.id}"):
        e.compact()
    assert g.layers() == [other, border]


def test_the_request_stays_the_newest_user_message_as_tool_rounds_grow(tmp_path: Path) -> None:
    # The scan for the request went back over every unit at each render once the last
    # round grew (its unit rebuilt); it now scans the rebuilt units only, and must still
    # find a request older than them, and a newer one as soon as it is appended.
    g = ConversationGraph.memory("s1")
    g.append({"role": "system", "content": "You are terse."})
    g.append({"role": "user", "content": "Fix the bug."})
    g.append({"role": "user", "content": "First read every module."})
    e = ContextEngine(g, policy(tmp_path), budget=3_000, clock=clock)

    def contents() -> list[str]:
        return [str(m.get("content")) for m in e.render().messages]

    for n in range(40):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
        g.append({"role": "assistant", "content": f"reading {n}", "tool_calls": [call]})
        g.append({"role": "tool", "tool_call_id": f"c{n}", "content": f"module {n} " * 60})
        request = "First read every module." if n <= 25 else "Now fix module 3."
        assert request in contents(), n
        if n == 25:
            g.append({"role": "user", "content": "Now fix module 3."})
            assert contents()[-1] == "Now fix module 3."
