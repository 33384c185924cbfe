"""Integrity: tool pairs repaired, provider role rules met, pending calls rendered."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from _context_helpers import Stable, call, policy, start, tool_round
from inline_snapshot import snapshot

from context import (
    Policy,
    provider_roles,
    render_context,
    repair_tool_pairs,
    tool_pair_problems,
)
from graph import ConversationGraph


def assistant(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [call(i) for i in ids]}


def result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": f"r{call_id}"}


def test_repair_drops_orphans_and_adds_missing_results() -> None:
    messages = [
        {"role": "user", "content": "go"},
        result("orphan"),
        assistant("a", "b"),
        result("b"),
        {"role": "user", "content": "next"},
        assistant("c"),
    ]
    assert tool_pair_problems(messages) == snapshot(
        [
            "message 1: tool result 'orphan' has no earlier call",
            "message 2: tool call 'a' (Bash) has no result before message 4",
            "message 5: tool call 'c' (Bash) has no result at the end",
        ]
    )
    fixed, notes = repair_tool_pairs(messages)
    assert fixed == [
        {"role": "user", "content": "go"},
        assistant("a", "b"),
        result("b"),
        {"role": "tool", "tool_call_id": "a", "content": "[no result was recorded]"},
        {"role": "user", "content": "next"},
        assistant("c"),
        {"role": "tool", "tool_call_id": "c", "content": "[no result was recorded]"},
    ]
    assert notes == snapshot(
        [
            "dropped orphaned result 'orphan'",
            "added a placeholder result for call 'a'",
            "added a placeholder result for call 'c'",
        ]
    )
    assert tool_pair_problems(fixed) == []
    assert repair_tool_pairs(fixed) == (fixed, [])


def test_provider_roles_merges_users_and_starts_with_a_user_turn() -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "one"},
        {"role": "user", "content": [{"type": "text", "text": "two"}]},
        assistant("a"),
        result("a"),
        {"role": "assistant", "content": "after tools"},
        {"role": "assistant", "content": "more"},
    ]
    fixed, notes = provider_roles(messages)
    assert fixed == snapshot(
        [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "(continuing the conversation)"},
            {"role": "assistant", "content": "hello"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": "ra"},
            {"role": "assistant", "content": "after tools\n\nmore"},
        ]
    )
    assert notes == snapshot(
        [
            "merged consecutive user messages",
            "merged consecutive assistant messages",
            "inserted a user turn before the first assistant message",
        ]
    )
    assert tool_pair_problems(fixed) == []


def test_merging_never_crosses_tool_calls() -> None:
    user = {"role": "user", "content": "u"}
    text = {"role": "assistant", "content": "x"}
    fixed, _ = provider_roles([user, text, assistant("a")])
    assert fixed == [user, {"role": "assistant", "content": "x", "tool_calls": [call("a")]}]
    fixed, notes = provider_roles([user, assistant("a"), text])
    assert fixed == [user, assistant("a"), text]
    assert notes == []


def test_pending_tool_call_renders_with_a_placeholder(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g)
    g.append(assistant("done", "slow"))
    g.append(result("done"))
    rendered = render_context(g, budget=10_000, policy=policy(tmp_path))
    assert Stable()(rendered.messages[2:]) == snapshot(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "done",
                        "type": "function",
                        "function": {"name": "Bash", "arguments": "{}"},
                    },
                    {
                        "id": "slow",
                        "type": "function",
                        "function": {"name": "Bash", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "done", "content": "rdone"},
            {
                "role": "tool",
                "tool_call_id": "slow",
                "content": "[no result yet: tool call slow is still running]",
            },
        ]
    )
    assert tool_pair_problems(rendered.messages) == []


def test_anthropic_render_never_has_consecutive_users(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g)
    g.append({"role": "user", "content": "and also this"})
    with g.function("research", input="x") as fn:
        g.append({"role": "user", "content": "inner task"})
        for i in range(12):
            g.append({"role": "user", "content": f"nudge {i}"})
            tool_round(g, [("Bash", "data " * 150)], prefix=f"r{i}")
        pol = Policy(model="claude-sonnet-4-5")
        assert pol.merge_roles
        for budget in (200, 600, 1_500, 100_000):
            for frame in (None, fn.id):
                rendered = render_context(g, budget=budget, policy=pol, frame=frame)
                roles = [m["role"] for m in rendered.messages]
                pairs = set(itertools.pairwise(roles))
                assert ("user", "user") not in pairs, (budget, roles)
                assert ("assistant", "assistant") not in pairs, (budget, roles)
                assert roles[0] == "system" and roles[1] == "user"
                assert tool_pair_problems(rendered.messages) == []
        fn.output = "ok"


def test_a_reused_call_id_is_renamed_in_the_prompt(tmp_path: Path) -> None:
    from context import ContextEngine, Policy

    g = ConversationGraph.memory("dup")
    g.append({"role": "user", "content": "task"})
    for n in (1, 2, 3):
        call = {"id": "same", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}
        g.append({"role": "assistant", "content": f"try {n}", "tool_calls": [call]})
        g.append({"role": "tool", "tool_call_id": "same", "content": f"out {n}"})
    rendered = ContextEngine(g, Policy(), budget=5_000).render()
    ids = [c["id"] for m in rendered.messages for c in m.get("tool_calls") or []]
    answers = [m["tool_call_id"] for m in rendered.messages if m["role"] == "tool"]
    assert ids == answers == ["same", "same~2", "same~3"]
    assert any("renamed a repeated call id" in a.what for a in rendered.actions)


def test_a_provider_compaction_merged_with_the_reply_keeps_its_block() -> None:
    block = {"type": "compaction", "content": "summary"}
    layer = {
        "role": "assistant",
        "content": None,
        "provider_specific_fields": {"compaction_blocks": [block]},
    }
    fixed, _ = provider_roles(
        [{"role": "user", "content": "task"}, layer, {"role": "assistant", "content": "next"}]
    )
    assert fixed[1:] == [
        {
            "role": "assistant",
            "content": "next",
            "provider_specific_fields": {"compaction_blocks": [block]},
        }
    ]
