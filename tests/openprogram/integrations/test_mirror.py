"""The mirror every adapter shares, on plain entries: appends only what is new, forks where
a framework's history diverged, keeps pairs valid, maps call ids back, and pairs each
rendered message with the entry it shows unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from graph import Tool, text_of
from openprogram import Session
from openprogram.integrations import Entry, Mirror


def _call(call_id: str, name: str = "lookup") -> dict[str, Any]:
    function = {"name": name, "arguments": "{}"}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _entries(*messages: dict[str, Any]) -> list[Entry]:
    return [Entry(m, original=("framework", i)) for i, m in enumerate(messages)]


def test_sync_appends_only_what_is_new(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", "s1")
    mirror = Mirror(session, "test")
    first = _entries({"role": "user", "content": "q"}, _call("c1"), _result("c1", "r1"))
    mirror.sync(first)
    mirror.sync(first)
    more = _entries(*[e.message for e in first], {"role": "assistant", "content": "a"})
    nodes = Mirror(Session(tmp_path / "op.db", "s1"), "test").sync(more)
    # user, assistant, its tool node (call and result), the new assistant: nothing twice
    assert len(set(nodes)) == 4 and len(Session(tmp_path / "op.db", "s1").graph) == 4


def test_a_diverging_history_forks_and_keeps_the_old_nodes(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db")
    mirror = Mirror(session, "test")
    mirror.sync(_entries({"role": "user", "content": "q"}, _call("c1"), _result("c1", "old")))
    mirror.sync(_entries({"role": "user", "content": "q"}, _call("c1"), _result("c1", "new")))
    results = [text_of(n.result.content) for n in session.graph.nodes() if n.result is not None]
    assert results == ["old", "new"]
    assert [m["content"] for m in session.graph.to_openai(head=mirror.head)][-1] == "new"
    mirror.sync(_entries({"role": "user", "content": "another start"}))
    assert [m["content"] for m in session.graph.to_openai(head=mirror.head)] == ["another start"]
    assert len(session.graph) == 6


def test_a_result_for_no_known_call_gets_a_synthetic_call(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db")
    mirror = Mirror(session, "test")
    mirror.sync(_entries({"role": "user", "content": "q"}, _result("lost", "orphan output")))
    tools = [n for n in session.graph.nodes() if isinstance(n.payload, Tool)]
    assert [t.payload.name for t in tools] == ["unknown"]  # type: ignore[union-attr]
    assert text_of(tools[0].result.content) == "orphan output"  # type: ignore[union-attr]


def test_a_reused_pending_call_id_is_renamed_and_mapped_back(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=50_000)
    mirror = Mirror(session, "test")
    mirror.sync(_entries({"role": "user", "content": "q"}, _call("c1")))  # left pending
    entries = _entries({"role": "user", "content": "again"}, _call("c1"), _result("c1", "done"))
    paired = mirror.render(entries)
    graph_ids = {n.payload.call_id for n in session.graph.nodes() if isinstance(n.payload, Tool)}
    assert graph_ids == {"c1", "c1~2"}
    assert [p.message for p in paired] == [e.message for e in entries]
    assert [p.entry for p in paired] == entries


def test_render_pairs_unchanged_messages_with_their_entries(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=50_000)
    mirror = Mirror(session, "test")
    entries = _entries(
        {"role": "system", "content": "s"},
        {"role": "user", "content": "same"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "same"},
    )
    paired = mirror.render(entries)
    assert [p.entry for p in paired] == entries
    assert all(p.entry is e for p, e in zip(paired, entries, strict=True))


def test_a_dropped_result_leaves_the_call_pending_on_a_new_branch(tmp_path: Path) -> None:
    """Regression: a framework that pops a tool result kept seeing it in the graph's branch
    (the head moved back to the call, whose tool node still held the result)."""
    session = Session(tmp_path / "op.db")
    mirror = Mirror(session, "test")
    mirror.sync(_entries({"role": "user", "content": "q"}, _call("c1"), _result("c1", "old")))
    mirror.sync(_entries({"role": "user", "content": "q"}, _call("c1")))
    shown = session.graph.to_openai(head=mirror.head)
    assert shown[-1]["content"].startswith("[no result yet")
    assert [text_of(n.result.content) for n in session.graph.nodes() if n.result] == ["old"]


def test_histories_that_interleave_each_append_only_what_is_new(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", "s1")
    mirror = Mirror(session, "test")
    histories: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
    for turn in range(5):
        for name, history in histories.items():
            history += [{"role": "user", "content": f"{name}{turn}"}, _call(f"{name}{turn}")]
            history.append(_result(f"{name}{turn}", f"out {name}{turn}"))
            nodes = mirror.sync(_entries(*history))
            shown = session.graph.to_openai(head=mirror.head)
            assert [m.get("content") for m in shown][-1] == f"out {name}{turn}"
            assert len(nodes) == len(history)
    assert len(session.graph) == 2 * 5 * 3  # a user, an assistant and a tool node a turn
    again = Mirror(Session(tmp_path / "op.db", "s1"), "test")  # another process: the index
    again.sync(_entries(*histories["a"]))
    assert len(Session(tmp_path / "op.db", "s1").graph) == 30


def test_a_call_two_histories_share_is_asked_again_once_after_one_answers_it(
    tmp_path: Path,
) -> None:
    """Two histories that issued the same call hold one node (one history synced twice
    looks the same); once one answers it, the other's pending call is a new call, stored
    once: syncing either again afterwards appends nothing."""
    session = Session(tmp_path / "op.db", "s1")
    mirror = Mirror(session, "test")
    pending = _entries(_call("a"))
    answered = _entries(_call("a"), _result("a", "ok"))
    mirror.sync(pending)
    mirror.sync(pending)
    mirror.sync(answered)
    assert len(session.graph) == 2  # the assistant and its tool node, now answered
    asked = mirror.sync(pending)
    assert len(session.graph) == 4 and asked[0] not in mirror.sync(answered)
    for _ in range(2):
        assert mirror.sync(pending) == asked
        shown = session.graph.to_openai(head=mirror.head)
        assert shown[-1]["content"].startswith("[no result yet")
        mirror.sync(answered)
        assert session.graph.to_openai(head=mirror.head)[-1]["content"] == "ok"
    assert len(Session(tmp_path / "op.db", "s1").graph) == 4


def test_a_branch_stored_before_the_index_is_resumed(tmp_path: Path) -> None:
    """A mirror's branch as earlier versions stored it (one list of steps) is read into
    the index: the same history appends nothing."""
    import json

    session = Session(tmp_path / "op.db", "s1")
    entries = _entries({"role": "user", "content": "q"}, {"role": "assistant", "content": "a"})
    user = session.graph.append(entries[0].message)
    answer = session.graph.append(entries[1].message)
    steps = [[e.digest, n.id, n.id, {}] for e, n in zip(entries, (user, answer), strict=True)]
    old = json.dumps({"base": None, "steps": steps})
    session.store.put_values(session.id, "integrations", {"test": old})
    nodes = Mirror(Session(tmp_path / "op.db", "s1"), "test").sync(entries)
    assert nodes == [user.id, answer.id] and len(Session(tmp_path / "op.db", "s1").graph) == 2


def test_a_growing_history_after_another_writer_appends_only_what_is_new(
    tmp_path: Path,
) -> None:
    """A resent history that extends the last one is recognised by its digests alone, unless
    the graph changed since (another process appended, or moved the head): then the stored
    paths are weighed again, and the new entries still go after the mirrored ones."""
    session = Session(tmp_path / "op.db", "s1")
    mirror = Mirror(session, "test")
    history = [{"role": "user", "content": "q"}, _call("a"), _result("a", "ok")]
    first = mirror.sync(_entries(*history))
    other = Session(tmp_path / "op.db", "s1")
    other.graph.append({"role": "user", "content": "from elsewhere"})
    history += [{"role": "assistant", "content": "done"}]
    nodes = mirror.sync(_entries(*history))
    assert nodes[:3] == first and len(session.graph) == 5
    assert session.graph.to_openai(head=mirror.head)[-1]["content"] == "done"
    history += [{"role": "user", "content": "next"}]
    assert mirror.sync(_entries(*history))[:4] == nodes and len(session.graph) == 6
    again = Mirror(Session(tmp_path / "op.db", "s1"), "test").sync(_entries(*history))
    assert again == mirror.nodes() and len(Session(tmp_path / "op.db", "s1").graph) == 6


def test_a_history_that_grows_onto_a_stored_branch_resumes_there(tmp_path: Path) -> None:
    """After an edited history (a fork), resending the first one and then more of it
    resumes on its stored branch: nothing it already wrote is written twice."""
    session = Session(tmp_path / "op.db", "s1")
    mirror = Mirror(session, "test")
    one = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a1"}]
    two = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a2"}]
    first = mirror.sync(_entries(*one, {"role": "user", "content": "more"}))
    mirror.sync(_entries(*two))
    assert mirror.sync(_entries(*one)) == first[:2]
    grown = mirror.sync(_entries(*one, {"role": "user", "content": "more"}))
    assert grown == first and len(session.graph) == 4


def test_a_replaced_result_after_a_shared_start_is_asked_again(tmp_path: Path) -> None:
    """The calls of a history's shared start are found from the last sync's (by digest): a
    result the framework replaced after that start still asks the call again on a branch."""
    session = Session(tmp_path / "op.db")
    mirror = Mirror(session, "test")
    question = {"role": "user", "content": "q"}
    mirror.sync(_entries(question, _call("c1"), _result("c1", "old")))
    mirror.sync(
        _entries(question, _call("c1"), _result("c1", "new"), {"role": "user", "content": "more"})
    )
    shown = session.graph.to_openai(head=mirror.head)
    assert [m.get("content") for m in shown if m["role"] == "tool"] == ["new"]
    assert shown[-1] == {"role": "user", "content": "more"}
    assert [text_of(n.result.content) for n in session.graph.nodes() if n.result] == ["old", "new"]


def test_a_history_resent_without_its_stored_answer_writes_nothing(tmp_path: Path) -> None:
    """The question resent (a retry, the bench's steady request) renders from the question
    while the graph's head stays on the answer stored after it: no head move is written
    back and forth; an answer that differs still goes on a new branch from the question."""
    session = Session(tmp_path / "op.db")
    mirror = Mirror(session, "test")
    question, answer = {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}
    nodes = mirror.sync(_entries(question, answer))
    written = session.graph.state.last_seq
    assert mirror.sync(_entries(question)) == nodes[:1]
    assert mirror.head == nodes[0] and session.graph.head == nodes[1]
    assert [m["content"] for m in session.engine.render(head=mirror.head).messages] == ["q"]
    assert mirror.sync(_entries(question, answer)) == nodes
    assert session.graph.state.last_seq == written and session.graph.head == nodes[1]
    mirror.sync(_entries(question))
    other = mirror.sync(_entries(question, {"role": "assistant", "content": "b"}))
    assert other[0] == nodes[0] and other[1] != nodes[1] and session.graph.head == other[1]
    assert [m["content"] for m in session.graph.to_openai()] == ["q", "b"]
