"""The budget is a law and the request is kept (issue 32): every prompt fits the budget
whenever its core can, and the user's latest request is in it, however long the agent has
worked on its own since."""

from __future__ import annotations

import json
from pathlib import Path

from _context_helpers import call, start

from context import Policy, render_context, tool_pair_problems
from graph import ConversationGraph


def test_emergency_cuts_a_huge_tool_call_in_the_newest_round(tmp_path: Path) -> None:
    """A ``Write`` of a whole file is as long as any output, and the newest round is never
    dropped: its arguments are cut (inside the JSON strings) like any long text."""
    g = ConversationGraph.memory("s1")
    start(g, task="Write the exporter module.")
    body = "\n".join(f"def f{i}(x):\n    return x * {i}  # helper {i}" for i in range(3_000))
    arguments = json.dumps({"file_path": "src/export.py", "content": body})
    g.append(
        {"role": "assistant", "content": "Writing.", "tool_calls": [call("w1", "Write", arguments)]}
    )
    g.append({"role": "tool", "tool_call_id": "w1", "content": "File written."})
    for preset in ("claude-code", "progressive"):
        rendered = render_context(g, budget=4_000, policy=Policy.named(preset))
        assert rendered.fits, preset
        assert rendered.tokens <= 4_000
        sent = rendered.messages[-2]["tool_calls"][0]["function"]["arguments"]
        shown = json.loads(sent)  # still valid JSON
        assert shown["file_path"] == "src/export.py"
        assert shown["content"].startswith("def f0(x):") and "elided" in shown["content"]
        assert tool_pair_problems(rendered.messages) == []
