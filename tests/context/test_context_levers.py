"""Issue 34's levers: what the agent named comes back. An offloaded output's preview shows
the lines of its middle that name what the call asked for; after a compaction, the lines of
the compacted history that the kept rounds name come back in a small block after the
summary. Each is a ``Policy`` field that turns it off, and each is the same bytes in every
engine and on every render until the next compaction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from _context_helpers import call, start, tool_round
from _layer_helpers import NOW, clock

from context import ContextEngine, Policy
from graph import ConversationGraph

WANTED = "src/widgets/alias.py:1412: def resolve_widget_alias(name): return ALIAS_TABLE_V2[name]"


def noise(prefix: str, lines: int) -> str:
    return "".join(f"{prefix} line {n}: nothing to see here at all\n" for n in range(lines))


def grep_session() -> ConversationGraph:
    g = ConversationGraph.memory("asked")
    start(g)
    middle = noise("middle", 1_000) + WANTED + "\n" + noise("more", 1_000)
    output = noise("head", 200) + middle + noise("tail", 200)
    arguments = json.dumps({"pattern": "resolve_widget_alias", "path": "src"})
    g.append(
        {
            "role": "assistant",
            "content": "Where is resolve_widget_alias defined?",
            "tool_calls": [call("grep_0", "Grep", arguments)],
        },
        at=NOW,
    )
    g.append({"role": "tool", "tool_call_id": "grep_0", "content": output}, at=NOW)
    return g


def tool_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m["content"]) for m in messages if m["role"] == "tool"]


def test_an_offload_preview_shows_the_lines_the_call_asked_for(tmp_path: Path) -> None:
    g = grep_session()
    engine = ContextEngine(g, Policy(), budget=16_000, clock=clock, state_dir=tmp_path)
    [text] = tool_texts(engine.render().messages)
    assert text.startswith("[output offloaded: ")
    assert f"1201: {WANTED}" in text  # the line, by its number in the output
    again = ContextEngine(g, Policy(), budget=16_000, clock=clock, state_dir=tmp_path)
    assert tool_texts(again.render().messages) == [text]  # the same bytes in every engine


def test_asked_lines_off_leaves_head_and_tail(tmp_path: Path) -> None:
    policy = Policy(offload_asked_share=None)
    engine = ContextEngine(grep_session(), policy, budget=16_000, clock=clock, state_dir=tmp_path)
    [text] = tool_texts(engine.render().messages)
    assert text.startswith("[output offloaded: ") and "def resolve_widget_alias" not in text


def output(i: int) -> str:
    body = "".join(f"pkg/module_{i}.py:{n}: value_{i}_{n} = compute()\n" for n in range(120))
    return body + (WANTED + "\n" if i == 1 else "")


WORKING = Policy(working_set_tokens=400)
"""The working set is off by default (it did not pay on the bench's TUNE half)."""


def working_session(rounds: int) -> ConversationGraph:
    g = ConversationGraph.memory("working")
    start(g)
    for i in range(rounds):
        tool_round(g, [("Bash", output(i))], prefix=f"c{i}", content=f"step {i}", at=NOW)
    tool_round(
        g, [("Bash", "ok")], prefix="named", content="Now resolve_widget_alias needs a fix.", at=NOW
    )
    return g


def working_blocks(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m["content"]) for m in messages if str(m["content"]).startswith("[working set")]


def test_the_compacted_lines_the_kept_rounds_name_come_back() -> None:
    g = working_session(30)
    rendered = ContextEngine(g, WORKING, budget=8_000, clock=clock).render()
    assert rendered.tokens <= 8_000
    text = "\n".join(str(m["content"]) for m in rendered.messages)
    assert "compact" in {source.tier for source in rendered.sources}
    [block] = working_blocks(rendered.messages)
    assert "ALIAS_TABLE_V2" in block and text.count("ALIAS_TABLE_V2") == 1
    off = ContextEngine(
        working_session(30), Policy(working_set_tokens=0), budget=8_000, clock=clock
    )
    assert "ALIAS_TABLE_V2" not in str(off.render().messages)


def test_the_working_set_is_stable_and_the_same_in_every_engine() -> None:
    g = working_session(30)
    engine = ContextEngine(g, WORKING, budget=8_000, clock=clock)
    first = engine.render().messages
    tool_round(g, [("Bash", "done")], prefix="later", content="ran it again", at=NOW)
    second = engine.render().messages
    assert working_blocks(first) == working_blocks(second) != []
    at = next(i for i, m in enumerate(first) if str(m["content"]).startswith("[working set"))
    assert second[: at + 1] == first[: at + 1]  # the prefix through the block is cached
    fresh = ContextEngine(g, WORKING, budget=8_000, clock=clock).render().messages
    assert working_blocks(fresh) == working_blocks(second)
