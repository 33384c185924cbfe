"""The mirror under any sequence of framework histories: appends, tool calls and results,
pops and rewrites. After every sync the graph's branch from the mirror's head is exactly the
framework's history, no node is ever lost, and a mirror reading the stored branch (another
process) appends nothing."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from openprogram import Session
from openprogram.integrations import Entry, Mirror

# internal: the pairing a mirror remembers is compared with one made anew
from openprogram.integrations._pairing import Pairing

RENAMED = re.compile(r"~\d+$")

Op = tuple[str, Any]
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.sampled_from(["go on", "why?", "stop"])),
        st.tuples(st.just("call"), st.sampled_from([("a",), ("b",), ("a", "b")])),
        st.tuples(st.just("result"), st.sampled_from(["ok", "failed"])),
        st.tuples(st.just("say"), st.sampled_from(["done", "thinking"])),
        st.tuples(st.just("pop"), st.integers(1, 3)),
    ),
    max_size=25,
)


def _unanswered(history: list[dict[str, Any]]) -> list[str]:
    """The calls of the newest assistant message with tool calls that have no result yet."""
    for at in range(len(history) - 1, -1, -1):
        if history[at].get("tool_calls"):
            done = {m["tool_call_id"] for m in history[at + 1 :] if m["role"] == "tool"}
            return [c["id"] for c in history[at]["tool_calls"] if c["id"] not in done]
        if history[at]["role"] != "tool":
            return []
    return []


def _apply(history: list[dict[str, Any]], op: Op) -> list[dict[str, Any]]:
    kind, value = op
    pending = _unanswered(history)
    if kind == "pop":
        return history[: max(0, len(history) - value)]
    if kind == "result":
        if not pending:
            return history
        return [*history, {"role": "tool", "tool_call_id": pending[0], "content": value}]
    if pending:  # frameworks answer every call before they go on
        return history
    if kind == "call":
        calls = [
            {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
            for i in value
        ]
        return [*history, {"role": "assistant", "content": None, "tool_calls": calls}]
    role = "user" if kind == "user" else "assistant"
    return [*history, {"role": role, "content": value}]


def _shown(session: Session, head: str | None) -> list[dict[str, Any]]:
    if head is None:
        return []
    shown = []
    for message in session.graph.to_openai(head=head):
        if message["role"] == "tool" and str(message["content"]).startswith("[no result yet"):
            continue
        if message["role"] == "tool":
            message = {**message, "tool_call_id": RENAMED.sub("", message["tool_call_id"])}
        for call in message.get("tool_calls") or ():
            call["id"] = RENAMED.sub("", call["id"])
        shown.append(message)
    return shown


@settings(max_examples=150, deadline=None, database=None)
@given(OPS)
def test_the_branch_is_always_the_frameworks_history(ops: list[Op]) -> None:
    session = Session(":memory:", budget=50_000)
    mirror = Mirror(session, "test")
    history: list[dict[str, Any]] = []
    stored = 0
    for op in ops:
        history = _apply(history, op)
        mirror.sync([Entry(message) for message in history])
        assert _shown(session, mirror.head) == history
        assert len(session.graph) >= stored  # nothing is ever deleted
        stored = len(session.graph)
    again = Mirror(session, "test")  # another process: the branch is read from the store
    again.sync([Entry(message) for message in history])
    assert len(session.graph) == stored and again.head == mirror.head


@example(ops=[(0, ("call", ("a", "b"))), (0, ("result", "ok")), (1, ("call", ("a", "b")))])
@example(ops=[(0, ("call", ("a",))), (1, ("call", ("a",))), (0, ("result", "ok"))])
@example(
    ops=[(1, ("result", "ok")), (0, ("call", ("a",))), (1, ("call", ("a",))), (1, ("result", "ok"))]
)
@settings(max_examples=100, deadline=None, database=None)
@given(
    st.lists(st.tuples(st.integers(0, 1), OPS.filter(bool).map(lambda ops: ops[0])), max_size=30)
)
def test_interleaved_histories_are_each_their_branch_and_stored_once(
    ops: list[tuple[int, Op]],
) -> None:
    """Two framework histories synced in turns through one mirror: each is its branch,
    and syncing either again (or a history that only extends one) appends nothing new,
    except that a history whose pending call the other one answered asks it again once."""
    session = Session(":memory:", budget=50_000)
    mirror = Mirror(session, "test")
    histories: list[list[dict[str, Any]]] = [[], []]
    for which, op in ops:
        histories[which] = _apply(histories[which], op)
        mirror.sync([Entry(message) for message in histories[which]])
        assert _shown(session, mirror.head) == histories[which]
    # Two histories that issued the same call share its node (the mirror cannot tell them
    # from one history synced twice), and a result fills that node: the other history's
    # pending call is then no stored branch, and showing it pending takes a new call
    # (its assistant node and one tool node per call), never more, and only once.
    for history in histories:
        stored = len(session.graph)
        mirror.sync([Entry(message) for message in history])
        assert _shown(session, mirror.head) == history
        asked = [m for m in history if m.get("tool_calls")]
        again = 1 + len(asked[-1]["tool_calls"]) if _unanswered(history) else 0
        assert len(session.graph) - stored <= again
    stored = len(session.graph)
    for history in histories:
        mirror.sync([Entry(message) for message in history])
        assert _shown(session, mirror.head) == history
    assert len(session.graph) == stored


@settings(max_examples=100, deadline=None, database=None)
@given(OPS, st.lists(st.integers(0, 3), max_size=25))
def test_a_mirror_that_remembers_its_last_sync_stores_what_a_new_one_does(
    ops: list[Op], resends: list[int]
) -> None:
    """A mirror takes what a history shares with its last sync from that sync (a framework
    resending one history with a new question, or with the answer it already stored); one
    made anew for every sync (another process each time) walks the stored steps instead:
    both store the same nodes and stand at the same place, sync after sync."""
    remembering = Session(":memory:", budget=50_000)
    forgetting = Session(":memory:", budget=50_000)
    mirror = Mirror(remembering, "test")
    history: list[dict[str, Any]] = []
    for n, op in enumerate(ops):
        history = _apply(history, op)
        back = resends[n] if n < len(resends) else 0
        for sent in (history[: max(0, len(history) - back)], history):  # a shorter one first
            nodes = mirror.sync([Entry(message) for message in sent])
            fresh = Mirror(forgetting, "test")
            again = fresh.sync([Entry(message) for message in sent])
            assert len(remembering.graph) == len(forgetting.graph)
            assert _shown(remembering, mirror.head) == _shown(forgetting, fresh.head) == sent
            assert len(nodes) == len(again) == len(sent)
            assert [remembering.graph.get(i).kind for i in nodes] == [
                forgetting.graph.get(i).kind for i in again
            ]


@settings(max_examples=100, deadline=None, database=None)
@given(OPS, st.lists(st.tuples(st.integers(0, 3), st.sampled_from([None, "A", "B"])), max_size=25))
@example(
    [("user", "go on"), ("say", "done"), ("user", "why?"), ("say", "done")],
    [(0, "A"), (2, "B"), (0, "A"), (0, "A")],
)
@example(  # instructions found past where a shorter history stops are not its own
    [("result", "ok"), *[("user", "go on")] * 5],
    [(0, "B"), (0, "A"), (2, "A"), (0, None), (0, "A"), (3, "A")],
)
def test_a_mirror_that_remembers_its_walk_follows_instructions_as_a_full_walk_does(
    ops: list[Op], sends: list[tuple[int, str | None]]
) -> None:
    """Instructions that change between syncs (stored where they change), with histories
    cut and resent (as the same entry objects): a mirror that keeps the path it last walked
    (resuming from the start a new one shares with it, longer or shorter), the changes of
    instructions on it and the digests of the entries, stores and stands where one that
    walks the whole path and digests every entry every time does."""
    remembering = Session(":memory:", budget=50_000)
    walking = Session(":memory:", budget=50_000)
    mirror, full = Mirror(remembering, "test"), Mirror(walking, "test")
    history: list[dict[str, Any]] = []
    kept: list[Entry] = []
    for n, op in enumerate(ops):
        history = _apply(history, op)
        back, system = sends[n] if n < len(sends) else (0, None)
        for sent in (history[: max(0, len(history) - back)], history):
            kept = [  # the very entries again where the message is the same (digests kept)
                kept[i] if i < len(kept) and kept[i].message == m else Entry(m)
                for i, m in enumerate(sent)
            ]
            mirror.sync(kept, system)
            full._walked = ([], [])  # internal: the shortcuts under test, turned off
            full._digested = ([], [])
            full.sync([Entry(message) for message in sent], system)
            assert len(remembering.graph) == len(walking.graph)
            shown = _shown(remembering, mirror.head)
            assert shown == _shown(walking, full.head)
            assert [m for m in shown if m["role"] != "system"] == sent


@settings(max_examples=100, deadline=None, database=None)
@given(
    OPS,
    st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from([None, "A", "B"]), st.booleans()),
        max_size=25,
    ),
    st.sampled_from([50_000, 300, 120]),
)
def test_a_mirror_that_remembers_its_pairs_pairs_as_a_fresh_one_does(
    ops: list[Op], sends: list[tuple[int, str | None, bool]], budget: int
) -> None:
    """Renders of histories cut, resent, with their entries kept (as LangChain's and
    Pydantic AI's adapters keep them) or made anew (as the Agents SDK's are), under a budget
    that compacts or not: the pairs a mirror takes from its last render for the start both
    share are those pairing the whole render afresh gives (the same messages, the very
    entries, the same layers)."""
    session = Session(":memory:", budget=budget)
    mirror = Mirror(session, "test")
    history: list[dict[str, Any]] = []
    kept: list[Entry] = []
    for n, op in enumerate(ops):
        history = _apply(history, op)
        back, system, anew = sends[n] if n < len(sends) else (0, None, False)
        for sent in (history[: max(0, len(history) - back)], history):
            entries = [
                kept[i] if not anew and i < len(kept) and kept[i].message == m else Entry(m)
                for i, m in enumerate(sent)
            ]
            kept = entries
            paired = mirror.render(entries, system=system)
            remembering = mirror._pairing  # internal: the shortcut under test, set aside
            mirror._pairing = Pairing()
            assert mirror.last is not None
            fresh = mirror._pair(mirror.last, entries)
            mirror._pairing = remembering
            assert [p.message for p in paired] == [p.message for p in fresh]
            assert [p.layer for p in paired] == [p.layer for p in fresh]
            assert all(map(lambda a, b: a.entry is b.entry, paired, fresh))
