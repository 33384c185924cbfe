"""The cache-aware microcompact path for Anthropic, sent for real over HTTP via litellm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _context_helpers import start, tool_round
from _fake_provider import FakeProvider

from context import ContextEngine, Policy, render_context, tool_pair_problems
from graph import ConversationGraph


def bash_graph(calls: int) -> ConversationGraph:
    g = ConversationGraph.memory("s1")
    start(g)
    for i in range(calls):
        tool_round(g, [("Bash", f"output {i}" + " ok" * 150)], prefix=f"toolu_{i:03d}")
    tool_round(g, [("deploy", "deployed")], prefix="toolu_deploy")
    g.append({"role": "assistant", "content": "all done"})
    return g


def test_anthropic_gets_context_edits_and_unchanged_messages(
    tmp_path: Path, fake_provider: FakeProvider
) -> None:
    g = bash_graph(55)
    pol = Policy(model="claude-sonnet-4-5", microcompact_first=50, microcompact_every=25)
    assert pol.use_cache_edits
    plain = render_context(g, budget=1_000_000, policy=pol)
    assert plain.context_management is None
    budget = plain.tokens - 1_000
    engine = ContextEngine(g, pol, budget=budget)
    rendered = engine.render()

    assert rendered.messages == plain.messages  # old outputs are all still there
    assert [a.tier for a in rendered.actions] == ["microcompact"]
    assert rendered.actions[0].what == "context edit clears 45 old tool output(s)"
    assert rendered.fits
    assert rendered.context_management == {
        "edits": [
            {
                "type": "clear_tool_uses_20250919",
                "trigger": {"type": "input_tokens", "value": int(budget * 0.6)},
                "keep": {"type": "tool_uses", "value": 5},
                "clear_at_least": {"type": "input_tokens", "value": 1_000},
                "exclude_tools": ["deploy"],
            }
        ]
    }
    [record] = rendered.records
    assert record.details == {"trigger": "count 50", "cleared": 45, "cache_edits": True}
    assert engine.render().context_management == rendered.context_management

    import litellm

    response = litellm.completion(
        model="anthropic/claude-sonnet-4-5",
        api_base=fake_provider.anthropic_base_url,
        api_key="x",
        messages=rendered.messages,
        context_management=rendered.context_management,
        extra_headers={"anthropic-beta": "context-management-2025-06-27"},
        max_tokens=64,
    )
    assert response.choices[0].message.content == "ok"
    [request] = fake_provider.requests
    assert request.path == "/v1/messages"
    body: dict[str, Any] = request.body
    assert body["context_management"] == rendered.context_management
    betas = {b.strip() for b in request.headers["anthropic-beta"].split(",")}
    assert "context-management-2025-06-27" in betas
    system = body["system"]
    assert (system if isinstance(system, str) else system[0]["text"]) == "You are terse."
    # Every tool result went out uncleared: the server does the clearing.
    results = [
        part
        for message in body["messages"]
        if isinstance(message["content"], list)
        for part in message["content"]
        if part.get("type") == "tool_result"
    ]
    assert len(results) == 56
    first = results[0]["content"]
    text = first if isinstance(first, str) else first[0]["text"]
    assert text.startswith("output 0 ok ok")


def test_other_models_clear_in_the_messages(tmp_path: Path) -> None:
    g = bash_graph(55)
    pol = Policy(model="gpt-4o", microcompact_first=50, microcompact_every=25)
    assert not pol.use_cache_edits
    plain = render_context(g, budget=1_000_000, policy=pol)
    rendered = render_context(g, budget=plain.tokens - 1_000, policy=pol)
    assert rendered.context_management is None
    assert rendered.messages != plain.messages
    cleared = [m for m in rendered.messages if "output cleared" in str(m.get("content"))]
    assert len(cleared) == 45
    assert tool_pair_problems(rendered.messages) == []
