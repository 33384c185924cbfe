"""Provider-side compaction on the wire: Anthropic's compact edit goes out, the compaction
block that comes back is a layer — replayed on later calls, listed, rolled back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _fake_provider import FakeProvider

from context import Policy
from openprogram import LiteLLMModel, Session


def _session(fake: FakeProvider, tmp_path: Path, **policy: Any) -> Session:
    model = LiteLLMModel(
        "anthropic/claude-sonnet-4-5", api_base=fake.anthropic_base_url, api_key="x"
    )
    chosen = Policy.claude_code("anthropic/claude-sonnet-4-5", **policy)
    return Session(
        ":memory:", model=model, policy=chosen, system="You are terse.", history_tools=False
    )


def _blocks(body: Any) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "compaction"
    ]


def test_the_compaction_block_is_a_layer_replayed_then_rolled_back(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    session = _session(
        fake_provider, tmp_path, provider_compaction="anthropic", provider_compact_tokens=50_000
    )
    for i in range(4):
        fake_provider.reply(f"answer {i}")
        session.llm(f"question {i}: look at src/module_{i}.py")
    first = fake_provider.requests[0]
    edits = first.body["context_management"]["edits"]
    assert {
        "type": "compact_20260112",
        "trigger": {"type": "input_tokens", "value": 50_000},
    } in edits
    assert "compact-2026-01-12" in first.headers.get("anthropic-beta", "")
    assert _blocks(first.body) == []

    # the provider compacts on the fifth call
    fake_provider.reply_compaction(
        "Earlier: four questions about src/module_0..3.py, answered.", "answer 4"
    )
    assert session.llm("question 4") == "answer 4"
    [layer] = session.engine.layers()
    assert layer.kind == "provider" and layer.active
    covered = {
        n.payload.content for n in map(session.graph.get, layer.covers) if n.kind == "dialogue"
    }  # type: ignore[union-attr]
    assert "answer 3" in covered and "question 4" not in covered
    assert [r.tier for r in session.engine.records()] == ["provider"]

    # the next call carries the block instead of what it replaced
    fake_provider.reply("answer 5")
    session.llm("question 5")
    sent = fake_provider.requests[-1].body
    assert _blocks(sent) == [
        {
            "type": "compaction",
            "content": "Earlier: four questions about src/module_0..3.py, answered.",
        }
    ]
    texts = str(sent["messages"])
    assert "answer 0" not in texts and "question 5" in texts and "answer 4" in texts
    assert session.engine.expand(layer.id)  # the originals are still there to read

    # rolled back: the originals go out again, without the block
    session.engine.rollback(layer.id)
    fake_provider.reply("answer 6")
    session.llm("question 6")
    again = fake_provider.requests[-1].body
    assert _blocks(again) == [] and "answer 0" in str(again["messages"])


def test_without_the_policy_no_edit_is_sent_and_no_layer_is_made(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    session = _session(fake_provider, tmp_path)
    fake_provider.reply_compaction("a summary", "fine")
    assert session.llm("hello") == "fine"
    assert "context_management" not in fake_provider.requests[0].body
    assert session.engine.layers() == []
    [reply] = [n for n in session.graph.nodes() if n.role == "assistant"]
    assert reply.meta["provider_items"] == [{"type": "compaction", "content": "a summary"}]
