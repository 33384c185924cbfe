"""Auto-compact: a plainly marked, incremental compaction layer with anchors, offloaded
references and node ids; pinned system prompt and task; focus; recent user messages."""

from __future__ import annotations

import json
import re
from pathlib import Path

from _context_helpers import policy, start, tool_round
from _layer_helpers import AUTO_COMPACT, NOW, Counting, clock, encode

from context import ContextEngine, TokenCounter, tool_pair_problems
from graph import ConversationGraph, layer_handle, node_handle

SYSTEM = "You are a careful coding agent."
TASK = "Fix the failing parser test in tests/test_parse.py."
BIG = "".join(f"row {i:05d} " + "v" * 50 + "\n" for i in range(250))  # 15,000 chars
COUNTER = TokenCounter(None)


def work(g: ConversationGraph, first: int, count: int) -> list[str]:
    """Rounds with a decision each; every fourth reads a big file (offloaded); every
    fifth is followed by a finished function. Returns the user node ids."""
    users = []
    for i in range(first, first + count):
        users.append(g.append({"role": "user", "content": f"step {i}: check src/mod_{i}.py"}).id)
        output = BIG + str(i) if i % 4 == 0 else f"pytest output {i}\n" * 40
        tool_round(
            g,
            [("Read" if i % 4 == 0 else "Bash", output)],
            prefix=f"c{i}",
            content=f"I decided to use approach_{i} instead of the old one.",
            at=NOW,
        )
        if i % 5 == 4:
            with g.function("research", input={"step": i}, expose="io") as fn:
                g.append({"role": "assistant", "content": f"looked into step {i}"})
                fn.output = f"step {i} is fine"
    return users


def compaction(messages: list[dict[str, object]]) -> tuple[int, str]:
    [(index, text)] = [
        (i, str(m["content"]))
        for i, m in enumerate(messages)
        if str(m["content"]).startswith("[Context Compaction]")
    ]
    return index, text


def test_auto_compact_marks_the_summary_and_carries_anchors_references_and_ids(
    tmp_path: Path,
) -> None:
    g = ConversationGraph.memory("s1")
    start(g, system=SYSTEM, task=TASK)
    work(g, 0, 16)
    pol = policy(tmp_path, cascade=AUTO_COMPACT)
    full = ContextEngine(g, pol, budget=1_000_000, clock=clock).render()
    e = ContextEngine(g, pol, budget=int(full.tokens * 0.6), clock=clock)
    rendered = e.render()
    assert rendered.fits
    assert tool_pair_problems(rendered.messages) == []
    assert [a.tier for a in rendered.actions if a.tier not in ("offload", "budget_reduction")] == [
        "compact"
    ]
    [record] = [r for r in rendered.records if r.tier == "compact"]
    assert record.error is None and record.details["incremental"] is False
    layer = e.layer(record.details["layer"])
    assert layer.kind == "compact" and layer.layer.meta["pinned"] is True

    # The system prompt and the first task stay first and verbatim.
    assert rendered.messages[:2] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    index, text = compaction(rendered.messages)
    assert rendered.messages[index]["role"] == "user"
    assert text == record.summary
    assert f'expand_layer("{layer_handle(layer)}")' in text
    first, last = (node_handle(g.get(layer.covers[i])) for i in (0, -1))
    assert f"nodes {first} … {last}" in text
    for title in ("User Intent", "Execution Progress", "Key Decisions", "Tried Solutions"):
        assert f"### {title}" in text
    assert "I decided to use approach_0 instead of the old one." in text
    assert record.anchors is not None
    assert "I decided to use approach_0 instead of the old one." in record.anchors["key_decisions"]

    # Offloaded outputs it covers are listed by node id (their files stay readable)...
    offloaded = {
        o["node"]
        for r in e.records()
        if r.tier == "offload"
        for o in r.offloaded  # type: ignore[misc]
    }
    references = text.split("## Offloaded References\n", 1)[1].split("\n## ", 1)[0]
    listed = [g.get(handle).id for handle in re.findall(r"^- node (\S+): output", references, re.M)]
    assert listed and set(listed) <= offloaded and set(listed) <= set(layer.covers)
    # ...and the finished functions it covers, with the id to expand.
    inspect = text.split("## Nodes to inspect\n", 1)[1]
    functions = re.findall(r'^- function research: expand_function\("(\S+)"\)', inspect, re.M)
    assert functions and {g.get(handle).id for handle in functions} <= set(layer.covers)
    for node_id in functions:  # by handle (n42), as prompts name nodes
        step = g.get(node_id).payload.input["step"]  # type: ignore[union-attr]
        assert e.expand(node_id) == [{"role": "assistant", "content": f"looked into step {step}"}]

    # The layer can be rolled back: the prompt is then what it was before.
    assert encode(e.render()) == encode(rendered)
    e.rollback(layer.id)
    unlimited = ContextEngine(g, pol, budget=1_000_000, clock=clock).render()
    assert unlimited.messages == full.messages


def test_a_second_compaction_is_incremental(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g, system=SYSTEM, task=TASK)
    work(g, 0, 12)
    pol = policy(tmp_path, cascade=AUTO_COMPACT)
    e = ContextEngine(g, pol, budget=1_000_000, clock=clock)
    first = e.compact()
    first_record = e.records()[-1]
    work(g, 12, 8)
    second = e.compact()
    record = e.records()[-1]
    assert record.tier == "compact" and record.details["incremental"] is True
    assert second.builds_on == (first.id,)
    assert set(first.covers) < set(second.covers)
    # Anchors merge as a union: the first compaction's decisions are all still there.
    assert first_record.anchors is not None and record.anchors is not None
    old = set(first_record.anchors["key_decisions"])
    assert old and old <= set(record.anchors["key_decisions"])
    assert len(record.anchors["key_decisions"]) > len(old)
    assert "I decided to use approach_12 instead of the old one." in record.anchors["key_decisions"]
    rendered = e.render()
    assert len([m for m in rendered.messages if "[Context Compaction]" in str(m["content"])]) == 1
    assert rendered.messages[:2] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    # Rolling back the first rolls back the second, which was built on it.
    assert [i.id for i in e.rollback(first.id)] == [second.id, first.id]


def test_an_incremental_compaction_hands_the_summarizer_the_previous_summary(
    tmp_path: Path,
) -> None:
    g = ConversationGraph.memory("s1")
    start(g, system=SYSTEM, task=TASK)
    work(g, 0, 10)
    summarizer = Counting()
    pol = policy(tmp_path, cascade=AUTO_COMPACT, model="anthropic/claude-sonnet-4-5")
    e = ContextEngine(g, pol, summarizer, budget=1_000_000, clock=clock)
    first = e.compact(focus="the parser")
    [request] = summarizer.requests
    assert request.kind == "compact" and request.focus == "the parser"
    assert request.previous is None
    assert request.task == TASK and request.system == SYSTEM
    assert request.model == "anthropic/claude-sonnet-4-5"  # whose cache holds that prefix
    assert e.records()[-1].details["focus"] == "the parser"
    assert first.layer.meta["focus"] == "the parser"
    work(g, 10, 6)
    e.compact()
    previous = summarizer.requests[-1].previous
    assert previous is not None
    assert previous.anchors.key_decisions == ("decision 1",)
    assert previous.prose == "summary number 1"
    # The new summary covers only what the first did not (the first is carried as previous).
    assert not set(summarizer.requests[-1].node_ids) & set(first.covers)
    assert summarizer.requests[-1].focus is None


def test_recent_user_messages_stay_verbatim_within_compact_user_tokens(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    start(g, system=SYSTEM, task=TASK)
    users = work(g, 0, 12)
    texts = [str(g.get(u).payload.content) for u in users]  # type: ignore[union-attr]
    room = 3 * COUNTER.count_message({"role": "user", "content": texts[0]}) + 2
    pol = policy(tmp_path, cascade=AUTO_COMPACT, compact_user_tokens=room)
    e = ContextEngine(g, pol, budget=1_000_000, clock=clock)
    layer = e.compact()
    rendered = e.render()
    index, _ = compaction(rendered.messages)
    kept = rendered.messages[2:index]
    covered_users = [t for u, t in zip(users, texts, strict=True) if u in layer.covers]
    assert kept == [{"role": "user", "content": t} for t in covered_users[-3:]]
    assert COUNTER.count_messages(kept) <= room
    # Nothing older than what fits, and the newest uncovered rounds follow as they were.
    assert covered_users[-4] not in [m["content"] for m in rendered.messages]
    assert rendered.messages[index + 1]["content"] == texts[len(covered_users)]

    none = policy(tmp_path / "none", cascade=AUTO_COMPACT, compact_user_tokens=0)
    fresh = ConversationGraph.memory("s2")
    start(fresh, system=SYSTEM, task=TASK)
    work(fresh, 0, 12)
    e2 = ContextEngine(fresh, none, budget=1_000_000, clock=clock)
    e2.compact()
    index, _ = compaction(e2.render().messages)
    assert index == 2


def test_the_system_prompt_and_task_are_never_compacted(tmp_path: Path) -> None:
    g = ConversationGraph.memory("s1")
    huge_task = TASK + " " + "context " * 1_500
    start(g, system=SYSTEM, task=huge_task)
    work(g, 0, 14)
    summarizer = Counting()
    pol = policy(tmp_path, cascade=AUTO_COMPACT)
    full = ContextEngine(g, pol, budget=1_000_000, clock=clock).render().tokens
    e = ContextEngine(g, pol, summarizer, budget=int(full * 0.7), clock=clock)
    rendered = e.render()
    assert rendered.fits
    assert rendered.messages[:2] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": huge_task},
    ]
    nodes = g.nodes()
    for request in summarizer.requests:
        assert nodes[0].id not in request.node_ids and nodes[1].id not in request.node_ids
    layer = e.layers()[-1]
    assert nodes[0].id not in layer.covers and nodes[1].id not in layer.covers


def test_a_compaction_that_replaces_more_may_write_a_longer_summary(tmp_path: Path) -> None:
    bounds, wholes = [], []
    for rounds in (10, 80, 240):
        g = ConversationGraph.memory("s1")
        start(g, system=SYSTEM, task=TASK)
        work(g, 0, rounds)
        summarizer = Counting()
        whole = ContextEngine(g, policy(tmp_path, cascade=()), budget=10**7, clock=clock)
        wholes.append(whole.render().tokens)
        pol = policy(tmp_path, cascade=AUTO_COMPACT, schedule="working")
        ContextEngine(g, pol, summarizer, budget=10**7, clock=clock).compact()
        [request] = summarizer.requests
        bounds.append(request.max_tokens)
    # compact_summary_tokens, or a tenth of what it replaces (the newest rounds stay) if
    # more, at most a third of the low-water mark (the working schedule's 24,000)
    assert bounds[0] == 3_000
    assert 3_000 < bounds[1] < wholes[1] // 10 and bounds[1] < 8_000
    assert bounds[2] == 8_000


def test_the_identifier_list_holds_what_the_prompt_loses(tmp_path: Path) -> None:
    """A compaction lists the identifiers of what it covers, but not those the rounds it
    keeps still show: every round names src/shared_util.py, each its own src/part_N.py."""
    g = ConversationGraph.memory("s1")
    start(g, system=SYSTEM, task=TASK)
    for i in range(30):
        g.append(
            {"role": "user", "content": f"step {i}: fix src/shared_util.py and src/part_{i}.py"}
        )
        tool_round(g, [("Bash", f"pytest output {i}\n" * 40)], prefix=f"c{i}", content="ok", at=NOW)
    e = ContextEngine(g, policy(tmp_path, cascade=AUTO_COMPACT), budget=1_000_000, clock=clock)
    e.compact()
    prompt = e.render().messages
    index, text = compaction(prompt)
    listed = text.split("## Identifiers\n", 1)[1].split("\n", 1)[0].split(", ")
    assert "src/part_0.py" in listed  # only the covered rounds named it
    kept = json.dumps(prompt[index + 1 :])
    assert "src/shared_util.py" in kept and "src/shared_util.py" not in listed
    assert not any(f"src/part_{i}.py" in kept for i in range(30) if f"src/part_{i}.py" in listed)
