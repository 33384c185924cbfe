"""Snapshots of rendered prompts, one per tier, on small hand-built graphs."""

from __future__ import annotations

from pathlib import Path

import pytest
from _context_helpers import Stable, policy, start, tool_round
from inline_snapshot import snapshot

from context import ContextEngine, Rendered, render_context, tool_pair_problems
from graph import ConversationGraph, node_handle


def tiers(rendered: object) -> list[str]:
    return [a.tier for a in rendered.actions]  # type: ignore[attr-defined]


# -- budget reduction -----------------------------------------------------------------


def test_budget_reduction_keeps_head_and_tail(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g)
    output = "a" * 2_500 + "b" * 2_500
    node = tool_round(g, [("Bash", output)], prefix="c")
    g.append({"role": "assistant", "content": "done"})
    rendered = render_context(g, budget=100_000, policy=policy(tmp_path))
    handle = node_handle(g.tools(node.id)[0])  # as prompts name nodes
    marker = (
        f'\n[... 1000 characters elided; page by page: read_output("{handle}", offset=2400) ...]\n'
    )
    assert rendered.messages[3]["content"] == output[:2_400] + marker + output[-1_600:]
    assert Stable()(rendered.messages) == snapshot(
        [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Fix the bug."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c_0",
                        "type": "function",
                        "function": {"name": "Bash", "arguments": "{}"},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "c_0",
                "content": """\
<a×2400>
[... 1000 characters elided; page by page: read_output("n4", offset=2400) ...]
<b×1600>\
""",
            },
            {"role": "assistant", "content": "done"},
        ]
    )
    assert tiers(rendered) == ["budget_reduction"]
    assert [r.tier for r in rendered.records] == ["budget_reduction"]  # reduced for the 1st time
    assert rendered.fits


def test_output_at_the_threshold_is_untouched(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g)
    tool_round(g, [("Bash", "z" * 4_000)], prefix="c")
    rendered = render_context(g, budget=100_000, policy=policy(tmp_path))
    assert rendered.messages[3]["content"] == "z" * 4_000
    assert rendered.actions == []


# -- offload --------------------------------------------------------------------------


def offload_graph() -> tuple[ConversationGraph, str, str]:
    g = ConversationGraph.memory("s1")
    start(g)
    output = "".join(f"line {i:04d} " + "." * 49 + "\n" for i in range(200))
    assert len(output) == 12_000
    node = tool_round(g, [("Read", output)], prefix="c")
    g.append({"role": "assistant", "content": "read it"})
    return g, output, g.tools(node.id)[0].id


def test_offload_writes_the_file_and_keeps_a_preview(tmp_path: Path) -> None:
    g, output, tool_id = offload_graph()
    pol = policy(tmp_path)
    engine = ContextEngine(g, pol, budget=100_000)
    rendered = engine.render()
    path = engine.folder.path / "tool_results" / "s1" / f"{tool_id}.txt"
    assert path.read_text() == output
    assert Stable(tmp_path)(rendered.messages) == snapshot(
        [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Fix the bug."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c_0",
                        "type": "function",
                        "function": {"name": "Read", "arguments": "{}"},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "c_0",
                "content": """\
[output offloaded: 12000 characters, 200 lines; page by page: read_output("n4", offset=2400)]
line 0000 <.×49>
line 0001 <.×49>
line 0002 <.×49>
line 0003 <.×49>
line 0004 <.×49>
line 0005 <.×49>
line 0006 <.×49>
line 0007 <.×49>
line 0008 <.×49>
line 0009 <.×49>
line 0010 <.×49>
line 0011 <.×49>
line 0012 <.×49>
line 0013 <.×49>
line 0014 <.×49>
line 0015 <.×49>
line 0016 <.×49>
line 0017 <.×49>
line 0018 <.×49>
line 0019 <.×49>
line 0020 <.×49>
line 0021 <.×49>
line 0022 <.×49>
line 0023 <.×49>
line 0024 <.×49>
line 0025 <.×49>
line 0026 <.×49>
line 0027 <.×49>
line 0028 <.×49>
line 0029 <.×49>
line 0030 <.×49>
line 0031 <.×49>
line 0032 <.×49>
line 0033 <.×49>
line 0034 <.×49>
line 0035 <.×49>
line 0036 <.×49>
line 0037 <.×49>
line 0038 <.×49>
line 0039 <.×49>

[... 8000 characters elided; page by page: read_output("n4", offset=2400) ...]
<.×39>
line 0174 <.×49>
line 0175 <.×49>
line 0176 <.×49>
line 0177 <.×49>
line 0178 <.×49>
line 0179 <.×49>
line 0180 <.×49>
line 0181 <.×49>
line 0182 <.×49>
line 0183 <.×49>
line 0184 <.×49>
line 0185 <.×49>
line 0186 <.×49>
line 0187 <.×49>
line 0188 <.×49>
line 0189 <.×49>
line 0190 <.×49>
line 0191 <.×49>
line 0192 <.×49>
line 0193 <.×49>
line 0194 <.×49>
line 0195 <.×49>
line 0196 <.×49>
line 0197 <.×49>
line 0198 <.×49>
line 0199 <.×49>
""",
            },
            {"role": "assistant", "content": "read it"},
        ]
    )
    assert tiers(rendered) == ["offload"]
    [record] = rendered.records
    assert record.tier == "offload"
    name = f"tool_results/s1/{tool_id}.txt"
    assert record.offloaded == [{"node": tool_id, "path": name, "chars": 12_000}]

    mtime = path.stat().st_mtime_ns
    again = engine.render()
    assert again.messages == rendered.messages
    assert again.records == []
    assert path.stat().st_mtime_ns == mtime

    fresh = render_context(g, budget=100_000, policy=pol)
    assert fresh.messages == rendered.messages
    assert fresh.records == []
    assert sorted(p.name for p in path.parent.iterdir()) == [f"{tool_id}.txt"]


# -- microcompact ---------------------------------------------------------------------


def test_microcompact_clears_old_outputs(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g)
    for i in range(60):
        tool_round(g, [("Bash", f"output {i} " + "ok " * 200)], prefix=f"c{i}")
    g.append({"role": "assistant", "content": "all done"})
    full = render_context(g, budget=1_000_000, policy=policy(tmp_path))
    rendered = render_context(g, budget=full.tokens - 500, policy=policy(tmp_path))
    assert tiers(rendered) == ["microcompact"]
    assert rendered.fits
    contents = [m["content"] for m in rendered.messages if m["role"] == "tool"]
    cleared = [c for c in contents if c.startswith("[old Bash output cleared")]
    kept = [c for c in contents if c.startswith("output ")]
    # The count trigger fires at 50 tool calls (then 75, 100, …) and clears all but the
    # newest 5 *at that point*: 45 cleared, the 15 newest (5 + the 10 since) kept.
    assert (len(cleared), len(kept)) == (45, 15)
    assert kept[0].startswith("output 45 ")
    assert Stable()(rendered.messages[2:4] + rendered.messages[-3:]) == snapshot(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c0_0",
                        "type": "function",
                        "function": {"name": "Bash", "arguments": "{}"},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "c0_0",
                "content": '[old Bash output cleared; read_output("n4") returns it]',
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c59_0",
                        "type": "function",
                        "function": {"name": "Bash", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c59_0", "content": "output 59< ok×200> "},
            {"role": "assistant", "content": "all done"},
        ]
    )
    [record] = rendered.records
    assert record.tier == "microcompact"
    assert record.details == {"trigger": "count 50", "cleared": 45}


def test_microcompact_keeps_newest_five_at_the_trigger(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g)
    for i in range(50):
        tool_round(g, [("Bash", f"output {i} " + "ok " * 200)], prefix=f"c{i}")
    full = render_context(g, budget=1_000_000, policy=policy(tmp_path))
    rendered = render_context(g, budget=full.tokens - 500, policy=policy(tmp_path))
    contents = [m["content"] for m in rendered.messages if m["role"] == "tool"]
    assert [c.split(" ")[1] for c in contents if c.startswith("output ")] == [
        "45",
        "46",
        "47",
        "48",
        "49",
    ]


def test_microcompact_leaves_other_tools(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g)
    for i in range(55):
        tool_round(
            g,
            [("Bash", f"b{i} " + "ok " * 200), ("deploy", f"d{i} " + "ok " * 200)],
            prefix=f"c{i}",
        )
    full = render_context(g, budget=1_000_000, policy=policy(tmp_path))
    rendered = render_context(g, budget=full.tokens - 500, policy=policy(tmp_path))
    deploys = [
        m["content"]
        for m in rendered.messages
        if m["role"] == "tool" and m["content"].startswith("d")
    ]
    assert len(deploys) == 55


# -- snip -----------------------------------------------------------------------------


def test_snip_drops_oldest_rounds_with_a_note(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g, task="Summarise the logs.")
    for i in range(8):
        g.append({"role": "user", "content": f"next step {i}"})
        g.append({"role": "assistant", "content": f"step {i}: " + "word " * 60})
    cascade = ("offload", "budget_reduction", "microcompact", "snip", "emergency")
    rendered = render_context(g, budget=400, policy=policy(tmp_path, cascade=cascade))
    assert tiers(rendered) == ["snip"]
    assert rendered.fits
    assert rendered.tokens <= int(400 * 0.6)
    assert Stable()(rendered.messages) == snapshot(
        [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Summarise the logs."},
            {
                "role": "user",
                "content": '[6 earlier round(s) were removed to fit the context window (nodes n3 … n14); read_history("n3", "n14") returns them.]',
            },
            {"role": "user", "content": "next step 6"},
            {"role": "assistant", "content": "step 6:< word×60> "},
            {"role": "user", "content": "next step 7"},
            {"role": "assistant", "content": "step 7:< word×60> "},
        ]
    )
    [record] = rendered.records
    assert record.tier == "snip"
    assert record.messages_after < record.messages_before


# -- emergency ------------------------------------------------------------------------


def running_rounds(tmp_path: Path, budget: int) -> Rendered:
    g = ConversationGraph.memory("s1")
    start(g)
    with g.function("research", input={"q": "logs"}) as fn:
        g.append({"role": "user", "content": "Research the logs."})
        for i in range(6):
            tool_round(g, [("deploy", f"result {i} " + "data " * 80)], prefix=f"r{i}")
        g.append({"role": "assistant", "content": "still going"})
        engine = ContextEngine(g, policy(tmp_path), budget=budget)
        rendered = engine.render(frame=fn.id)
        fn.output = "ok"
    assert "snip" not in tiers(rendered)
    assert rendered.fits
    assert tool_pair_problems(rendered.messages) == []
    return rendered


def test_emergency_stubs_running_rounds(tmp_path: Path) -> None:
    rendered = running_rounds(tmp_path, budget=500)
    assert tiers(rendered) == ["emergency"]
    assert rendered.records[0].details == {"steps": ["stubbed running rounds"]}
    assert Stable()(rendered.messages) == snapshot(
        [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Fix the bug."},
            {"role": "user", "content": "Research the logs."},
            {
                "role": "assistant",
                "content": '[earlier step elided to fit the context; read_history("n5", "n6") returns it; it called deploy]',
            },
            {
                "role": "assistant",
                "content": '[earlier step elided to fit the context; read_history("n8", "n9") returns it; it called deploy]',
            },
            {
                "role": "assistant",
                "content": '[earlier step elided to fit the context; read_history("n11", "n12") returns it; it called deploy]',
            },
            {
                "role": "assistant",
                "content": '[earlier step elided to fit the context; read_history("n14", "n15") returns it; it called deploy]',
            },
            {
                "role": "assistant",
                "content": '[earlier step elided to fit the context; read_history("n17", "n18") returns it; it called deploy]',
            },
            {
                "role": "assistant",
                "content": '[earlier step elided to fit the context; read_history("n20", "n21") returns it; it called deploy]',
            },
            {"role": "assistant", "content": "still going"},
        ]
    )


def test_emergency_drops_stubs_that_do_not_fit(tmp_path: Path) -> None:
    rendered = running_rounds(tmp_path, budget=200)
    assert tiers(rendered) == ["emergency"]
    assert rendered.records[0].details == snapshot(
        {"steps": ["stubbed running rounds", "dropped 6 unit(s)"]}
    )
    assert Stable()(rendered.messages) == snapshot(
        [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Fix the bug."},
            {"role": "user", "content": "Research the logs."},
            {
                "role": "user",
                "content": '[6 earlier round(s) were removed to fit the context window (nodes n5 … n21); read_history("n5", "n21") returns them.]',
            },
            {"role": "assistant", "content": "still going"},
        ]
    )


def test_emergency_cuts_an_oversized_task(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g, task="please " + "q" * 6_000 + " thanks")
    g.append({"role": "assistant", "content": "ok"})
    rendered = render_context(g, budget=200, policy=policy(tmp_path))
    assert tiers(rendered) == ["emergency"]
    assert rendered.fits
    assert Stable()(rendered.messages) == snapshot(
        [
            {"role": "system", "content": "You are terse."},
            {
                "role": "user",
                "content": """\
please <q×53>
[... 5914 characters elided; page by page: read_output("n2", offset=60) ...]
<q×33> thanks\
""",
            },
            {"role": "assistant", "content": "ok"},
        ]
    )
    [record] = rendered.records
    assert record.tier == "emergency"
    assert record.details == snapshot({"steps": ["cut long texts"]})


# -- frames and functions -------------------------------------------------------------


def test_frame_render_inside_a_running_function(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g)
    g.append({"role": "assistant", "content": "I will research first."})
    with g.function("research", input={"q": "parse"}) as fn:
        g.append({"role": "user", "content": "Find where parse() fails."})
        tool_round(g, [("grep", "parse.py:12: def parse(")], prefix="g")
        engine = ContextEngine(g, policy(tmp_path), budget=10_000)
        inside = engine.render(frame=fn.id)
        top = ContextEngine(g, policy(tmp_path), budget=10_000).render()
        fn.output = {"file": "parse.py", "line": 12}
    assert Stable()(inside.messages) == snapshot(
        [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Fix the bug."},
            {"role": "assistant", "content": "I will research first."},
            {"role": "user", "content": "Find where parse() fails."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "g_0",
                        "type": "function",
                        "function": {"name": "grep", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "g_0", "content": "parse.py:12: def parse("},
        ]
    )
    assert top.messages == inside.messages
    assert inside.actions == []


def test_finished_function_renders_as_io_unit(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g)
    with g.function("research", input={"q": "parse"}) as fn:
        g.append({"role": "user", "content": "inner task"})
        g.append({"role": "assistant", "content": "inner work " * 50})
        fn.output = {"file": "parse.py", "line": 12}
    with pytest.raises(ValueError), g.function("lint", input="src/"):
        g.append({"role": "assistant", "content": "linting"})
        raise ValueError("no config")
    g.append({"role": "assistant", "content": "Found it in parse.py."})
    rendered = render_context(g, budget=10_000, policy=policy(tmp_path))
    assert Stable()(rendered.messages) == snapshot(
        [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Fix the bug."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "fn_3",
                        "type": "function",
                        "function": {"name": "research", "arguments": '{"input": {"q": "parse"}}'},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "fn_3",
                "content": '{"file": "parse.py", "line": 12}',
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "fn_7",
                        "type": "function",
                        "function": {"name": "lint", "arguments": '{"input": "src/"}'},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "fn_7",
                "content": "[function lint failed: ValueError: no config]",
            },
            {"role": "assistant", "content": "Found it in parse.py."},
        ]
    )
    assert tool_pair_problems(rendered.messages) == []
    assert "inner work" not in str(rendered.messages)


# -- regressions ----------------------------------------------------------------------


def test_emergency_cut_marker_counts_the_uncut_text(tmp_path: Path) -> None:
    task = "please " + "lorem ipsum dolor sit amet " * 300 + " thanks"
    g = ConversationGraph.memory("s1")
    start(g, task=task)
    g.append({"role": "assistant", "content": "ok"})
    rendered = render_context(g, budget=300, policy=policy(tmp_path))
    assert rendered.fits
    cut = rendered.messages[1]["content"]
    head, marker, tail = cut.split("\n")
    elided = int(marker.split(" ")[1])
    assert task.startswith(head) and task.endswith(tail)
    assert len(head) + elided + len(tail) == len(task)


def test_emergency_moves_on_when_the_longest_text_cannot_shrink(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g, system="s " * 150, task="t " * 150)
    g.append({"role": "assistant", "content": "a " * 150})
    # 260: the cut markers name nodes by handle, shorter than ids were (300 before)
    rendered = render_context(g, budget=260, policy=policy(tmp_path))
    assert rendered.fits
    assert all("elided" in m["content"] for m in rendered.messages)


def test_microcompact_never_grows_an_output(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g)
    for i in range(60):
        tool_round(g, [("Bash", "")], prefix=f"c{i}", content="step " * 30)
    rendered = render_context(g, budget=400, policy=policy(tmp_path))
    assert all(m["content"] == "" for m in rendered.messages if m["role"] == "tool")
    assert [a for a in rendered.actions if a.tier == "microcompact"] == []


def test_reapplied_snip_does_not_shift_what_microcompact_cleared(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g, system="sys " * 300)
    for i in range(12):
        tool_round(g, [("Bash", f"out {i} " + "x y " * 100)], prefix=f"c{i}")
    pol = policy(tmp_path, microcompact_first=3, microcompact_every=5)
    engine = ContextEngine(g, pol, budget=500)
    first, second = engine.render(), engine.render()
    assert "snip" in tiers(first)
    assert second.messages == first.messages
    assert second.tokens == first.tokens
    newest = [m["content"] for m in second.messages if m["role"] == "tool"][-1]
    assert newest.startswith("out 11 ")


def test_exclude_tools_survive_a_reapplied_snip(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g, system="sys " * 300)
    tool_round(g, [("deploy", "deployed " * 50)], prefix="d")
    for i in range(12):
        tool_round(g, [("Bash", f"out {i} " + "x y " * 100)], prefix=f"c{i}")
    pol = policy(tmp_path, model="claude-sonnet-4-5", microcompact_first=3, microcompact_every=5)
    engine = ContextEngine(g, pol, budget=500)
    first, second = engine.render(), engine.render()
    assert "snip" in tiers(first)
    assert first.context_management is not None
    assert first.context_management["edits"][0]["exclude_tools"] == ["deploy"]
    assert second.context_management == first.context_management
    assert second.messages == first.messages
