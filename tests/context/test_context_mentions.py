"""A placeholder says what it hides: a cleared output lists the identifiers it mentioned,
an offload preview's elision marker those of the part it leaves out, sized by a share of
the hidden text and the same bytes in every engine."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from _context_helpers import start, tool_round
from _layer_helpers import NOW, clock

from context import ContextEngine, Policy
from graph import ConversationGraph

BUDGET = 16_000


def output(i: int, lines: int = 90) -> str:
    return "".join(
        f"src/pkg/module_{i}.py:{n}: value_{i} = compute_{i}_{n % 3}()\n" for n in range(lines)
    )


def session(rounds: int) -> ConversationGraph:
    g = ConversationGraph.memory("mentions")
    start(g)
    for i in range(rounds):
        tool_round(g, [("Bash", output(i))], prefix=f"c{i}", content=f"step {i}", at=NOW)
    return g


def tool_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m["content"]) for m in messages if m["role"] == "tool"]


def listed(text: str) -> list[str]:
    found = re.search(r"(?:it mentioned|they mention) ([^\]]*?)(?: \.\.\.)?\]", text)
    return found.group(1).split(", ") if found else []


def test_a_cleared_output_lists_what_it_mentioned() -> None:
    g = session(24)
    rendered = ContextEngine(
        g,
        Policy(offload_chars_per_token=None, schedule_floor_exponent=None),
        budget=BUDGET,
        clock=clock,
    ).render()
    cleared = [t for t in tool_texts(rendered.messages) if "output cleared" in t]
    assert cleared
    for text in cleared:
        i = int(re.search(r"value_(\d+)", text).group(1))  # type: ignore[union-attr]
        names = listed(text)
        assert f"value_{i}" in names  # the most used first
        assert all(name in output(i) for name in names)  # nothing it did not say
        # a twentieth of the output's size (four bytes a token), at most identifier_tokens
        assert len(text) < len(output(i)) // 4


def test_every_engine_writes_the_same_placeholders() -> None:
    g = session(24)
    first = ContextEngine(g, Policy(), budget=BUDGET, clock=clock).render()
    again = ContextEngine(g, Policy(), budget=BUDGET, clock=clock).render()
    assert tool_texts(first.messages) == tool_texts(again.messages)


def test_lists_off_leaves_bare_placeholders() -> None:
    for policy in (Policy(identifier_tokens=0), Policy(stub_identifier_share=None)):
        rendered = ContextEngine(session(24), policy, budget=BUDGET, clock=clock).render()
        cleared = [t for t in tool_texts(rendered.messages) if "output cleared" in t]
        assert cleared and all(t.endswith("returns it]") for t in cleared)


def test_an_offload_preview_names_what_its_middle_holds(tmp_path: Path) -> None:
    g = ConversationGraph.memory("offload")
    start(g)
    head = "".join(f"header line {n}\n" for n in range(200))
    middle = "".join(
        f"src/core/engine.py:{n}: raise ParseError(token_{n % 4})\n" for n in range(2_000)
    )
    tail = "".join(f"footer line {n}\n" for n in range(200))
    tool_round(g, [("Bash", head + middle + tail)], prefix="big", content="ran it", at=NOW)
    rendered = ContextEngine(g, Policy(), budget=BUDGET, clock=clock, state_dir=tmp_path).render()
    [text] = tool_texts(rendered.messages)
    assert text.startswith("[output offloaded: ") and text.endswith(tail[-200:])
    names = listed(text)
    assert names[:5] == ["ParseError", "token_0", "token_1", "token_2", "token_3"]  # by use
    assert any(name.startswith("src/core/engine.py") for name in names)
    assert all(name in middle for name in names)
