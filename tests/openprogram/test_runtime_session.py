"""``Session``: create and reopen, list, fork, copy, delete and usage, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _runtime_helpers import (
    contents,
    long_session,
    lookup,
    placeholders,
    small_policy,
    texts,
    without_ids,
)
from sqlalchemy import MetaData, func, select

import openprogram
from context import read_jsonl, records_path
from graph import MemoryStore, NodeNotFound, SQLStore, resolve_ref
from openprogram import LiteLLMModel, ModelResponse, Session, SessionError, Usage
from openprogram.testing import FunctionModel, ModelRequest, TestModel, tool_call


def _session(db: Any, tmp_path: Path, replies: list[Any], **kwargs: Any) -> Session:
    return Session(db, model=TestModel(replies), state_dir=tmp_path / "state", **kwargs)


# -- create, reopen, list ------------------------------------------------------------------
def test_create_and_reopen(store_url: str, tmp_path: Path) -> None:
    first = _session(store_url, tmp_path, ["Paris."], system="Be brief.")
    assert first.llm("Capital of France?") == "Paris."
    assert first.store.url.startswith(("sqlite", "postgresql"))
    sent = first.graph.to_openai()

    again = _session(store_url, tmp_path, ["Berlin."], session_id=first.id, system="Be brief.")
    assert again.id == first.id
    assert again.graph.to_openai() == sent  # the same messages, and no second system prompt
    assert again.interrupted == []
    assert again.llm("And Germany?") == "Berlin."
    assert contents(again.graph.to_openai()) == [
        "Be brief.",
        "Capital of France?",
        "Paris.",
        "And Germany?",
        "Berlin.",
    ]
    # the reopened session sent the whole conversation, continued from the stored head
    model = again.model
    assert isinstance(model, TestModel)
    assert contents(model.requests[0].messages) == contents(again.graph.to_openai())[:-1]


def test_list_sessions_oldest_first(store_url: str, tmp_path: Path) -> None:
    one = _session(store_url, tmp_path, ["a"])
    one.llm("first")
    two = _session(store_url, tmp_path, [], system="only a system prompt")
    listed = Session.list(store_url)
    assert [info.id for info in listed] == [one.id, two.id]
    assert [info.nodes for info in listed] == [2, 1]
    assert listed[0].created <= listed[1].created


def test_memory_and_store_objects(tmp_path: Path) -> None:
    store = MemoryStore()
    session = _session(store, tmp_path, ["hi"], session_id="mine")
    assert session.store is store and session.id == "mine"
    session.llm("hello")
    assert [info.id for info in Session.list(store)] == ["mine"]
    assert Session.list(":memory:") == []  # a new memory store each time
    with pytest.raises(SessionError, match="not a safe id"):
        Session(store, "../escape")


def test_a_store_path_is_a_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "op.db"
    session = _session(path, tmp_path, ["ok"])
    session.llm("hi")
    assert path.exists()
    assert [info.id for info in Session.list(path)] == [session.id]


# -- fork --------------------------------------------------------------------------------
def test_fork_branches_the_same_session(store_url: str, tmp_path: Path) -> None:
    session = _session(store_url, tmp_path, ["hi", "again"], system="sys")
    session.llm("q1")
    session.llm("q2")
    answer = session.graph.nodes()[2]
    assert answer.role == "assistant"

    branch = session.fork(answer.id)
    assert branch is not session and branch.id == session.id
    assert branch.graph.head == answer.id
    branch.model = TestModel(["branch answer"])
    assert branch.llm("alternative") == "branch answer"

    head = session.graph.head
    assert head is not None
    on_branch = branch.engine.render(head=branch.graph.head).messages
    on_main = session.engine.render(head=head).messages
    assert contents(on_branch) == ["sys", "q1", "hi", "alternative", "branch answer"]
    assert contents(on_main) == ["sys", "q1", "hi", "q2", "again"]
    # both branches are in the one stored session
    session.graph.refresh()
    assert len(session.graph.branches()) == 2
    assert [info.id for info in Session.list(store_url)] == [session.id]


def test_fork_of_an_unknown_node_fails(tmp_path: Path) -> None:
    session = _session(":memory:", tmp_path, ["hi"])
    session.llm("q")
    with pytest.raises(NodeNotFound, match="no node"):
        session.fork("01NOTANODE0000000000000000")


# -- copy --------------------------------------------------------------------------------
def test_copy_into_the_same_store(store_url: str, tmp_path: Path) -> None:
    session = _session(store_url, tmp_path, ["hi", "there"], system="sys", budget=5_000)
    session.llm("q1")
    session.llm("q2")
    copy = session.copy()
    assert copy.id != session.id and copy.store is session.store
    assert copy.graph.to_openai() == session.graph.to_openai()
    assert not {n.id for n in copy.graph.nodes()} & {n.id for n in session.graph.nodes()}
    assert copy.engine.budget == 5_000  # the copy keeps the session's budget
    assert {info.id for info in Session.list(store_url)} == {session.id, copy.id}

    copy.model = TestModel(["copied answer"])
    copy.llm("only in the copy")
    reopened = Session(store_url, session.id, state_dir=tmp_path / "state")
    assert "only in the copy" not in contents(reopened.graph.to_openai())
    with pytest.raises(SessionError, match="already exists"):
        session.copy(session_id=copy.id)


def test_copy_of_one_branch(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/op.db"
    session = _session(db, tmp_path, ["hi", "main answer"], system="sys")
    session.llm("q1")
    session.llm("main question")
    branch = session.fork(session.graph.nodes()[2].id)
    branch.model = TestModel(["branch answer"])
    branch.llm("branch question")
    head = branch.graph.head
    assert head is not None and head not in session.graph  # appended by the other object

    copy = session.copy(head=head)
    assert contents(copy.graph.to_openai()) == [
        "sys",
        "q1",
        "hi",
        "branch question",
        "branch answer",
    ]
    assert len(copy.graph) == 5 and len(copy.graph.branches()) == 1
    everything = session.copy()
    assert len(everything.graph) == 7 and len(everything.graph.branches()) == 2


def test_copy_keeps_layers_and_renames_the_ids_they_name(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/op.db"
    session = long_session(tmp_path, db, rounds=20, budget=2_500)
    assert session.graph.layers(active=True)
    copy = session.copy()
    copied = {info.id: info for info in copy.graph.layers()}
    assert len(copied) == len(session.graph.layers())
    assert not set(copied) & {info.id for info in session.graph.layers()}

    named = placeholders(copy.engine.render(head=copy.graph.head).messages)
    layers = {info.id for info in copy.graph.layers()}  # the render may have made more
    assert any(tool == "expand_layer" for tool, _ in named)
    for tool, args in named:  # by handle (n42, L3): the copy's own ids, the same handles
        found = resolve_ref(copy.graph.state, args[0])
        assert found in (layers if tool == "expand_layer" else copy.graph), (tool, args)
    # the copy's first layer reads back what the original's first layer covers
    first = next(iter(copied))
    expanded = copy.history.expand_layer(first)
    original = session.graph.layers()[0].id
    assert expanded.replace(first, "L") == session.history.expand_layer(original).replace(
        original, "L"
    )
    assert expanded.startswith("[assistant] step ") and "[tool result call_lookup_" in expanded


@pytest.mark.postgres
def test_copy_from_sqlite_to_postgres(tmp_path: Path, pg_db_url: str) -> None:
    session = _session(tmp_path / "op.db", tmp_path, ["hi", "there"], system="sys")

    @openprogram.function
    def double(x: int) -> int:
        return x * 2

    with session:
        session.llm("q1")
        double(21)
        session.llm("q2")
    copy = session.copy(pg_db_url)
    assert copy.store.url.startswith("postgresql")
    # the function has a new id, and the same handle: its call reads fn_<seq> in both
    assert copy.graph.to_openai() == session.graph.to_openai()
    assert without_ids(copy.graph.to_openai()) == without_ids(session.graph.to_openai())
    reopened = Session(pg_db_url, copy.id, state_dir=tmp_path / "state")
    assert reopened.graph.to_openai() == copy.graph.to_openai()
    function = next(n for n in reopened.graph.nodes() if n.kind == "function")
    assert (function.status, function.output) == ("completed", 42)
    assert [info.id for info in Session.list(pg_db_url)] == [copy.id]


# -- delete ------------------------------------------------------------------------------
def _rows(store: SQLStore, session: str) -> dict[str, int]:
    """The session's rows in every stored table that has a ``session`` column, and its
    row in ``graph_sessions``, as the database itself lists its tables."""
    tables = MetaData()
    counts = {}
    with store.engine.connect() as connection:
        tables.reflect(bind=connection)
        for table in tables.sorted_tables:
            if "session" in table.c:
                query = select(func.count()).select_from(table).where(table.c.session == session)
                counts[table.name] = int(connection.execute(query).scalar_one())
        sessions = tables.tables["graph_sessions"]
        query = select(func.count()).select_from(sessions).where(sessions.c.id == session)
        counts[sessions.name] = int(connection.execute(query).scalar_one())
    assert {"graph_nodes", "graph_edges", "graph_events", "graph_values"} <= counts.keys()
    assert {"graph_logs", "graph_leases"} <= counts.keys()
    return counts


def _busy(db: str, tmp_path: Path) -> Session:
    """A session with offloaded outputs, records, tier state, token counts and a lease."""
    reply = {"tool_calls": [tool_call("lookup", {"key": "k_3"})]}
    session = Session(
        db,
        model=TestModel([reply, "found"]),
        policy=small_policy(tmp_path, offload_chars=2_000, offload_share=None),
        system="sys",
    )
    session.llm("look up k_3", tools=[lookup])
    session.store.put_lease(session.id, "some-function", "host:1:x", 1)
    return session


def test_delete_removes_one_session_and_nothing_else(store_url: str, tmp_path: Path) -> None:
    doomed = _busy(store_url, tmp_path)
    kept = _busy(store_url, tmp_path)
    state = doomed.folder.path
    store = doomed.store
    assert isinstance(store, SQLStore)
    for session in (doomed, kept):
        assert all(_rows(store, session.id).values())
        assert (state / "tool_results" / session.id).is_dir()
        assert records_path(state, session.id).exists()
    kept_messages = kept.engine.render(head=kept.graph.head).messages
    kept_records = kept.engine.records()
    assert {r.tier for r in kept_records} >= {"offload"}

    doomed.delete()
    assert set(_rows(store, doomed.id).values()) == {0}
    assert not (state / "tool_results" / doomed.id).exists()
    assert not records_path(state, doomed.id).exists()
    assert [info.id for info in Session.list(store_url)] == [kept.id]

    assert all(_rows(store, kept.id).values())
    assert (state / "tool_results" / kept.id).is_dir()
    assert list(read_jsonl(records_path(state, kept.id)))
    reopened = Session(store_url, kept.id, policy=kept.policy)
    assert reopened.engine.records() == kept_records
    assert reopened.engine.render(head=reopened.graph.head).messages == kept_messages


# -- usage -------------------------------------------------------------------------------
def _billing(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]["content"]
    usage = Usage(input_tokens=100, output_tokens=10, cached_tokens=30, cache_written=20, cost=0.01)
    return ModelResponse({"role": "assistant", "content": f"re: {last}"}, usage, model="big")


def _cheap(request: ModelRequest) -> ModelResponse:
    usage = Usage(input_tokens=7, output_tokens=3, cost=0.001)
    return ModelResponse({"role": "assistant", "content": "cheap"}, usage, model="small")


def test_usage_per_model_and_function(tmp_path: Path) -> None:
    session = Session(":memory:", model=FunctionModel(_billing), state_dir=tmp_path / "state")

    @openprogram.function
    def research(topic: str) -> str:
        openprogram.llm(f"about {topic}")
        return str(openprogram.llm("again", model=FunctionModel(_cheap)))

    @openprogram.function(name="plan")
    def planner() -> str:
        openprogram.llm("plan it")
        return str(research("caching"))

    with session:
        session.llm("top-level question")
        planner()

    usage = session.usage()
    big = {"calls": 3, "input_tokens": 300, "cached_tokens": 90, "output_tokens": 30, "cost": 0.03}
    small = {"calls": 1, "input_tokens": 7, "cached_tokens": 0, "output_tokens": 3, "cost": 0.001}
    assert usage["models"] == {"big": big, "small": small}
    assert usage["total"] == {
        "calls": 4,
        "input_tokens": 307,
        "cached_tokens": 90,
        "output_tokens": 33,
        "cost": 0.031,
    }
    one_big = {"calls": 1, "input_tokens": 100, "cached_tokens": 30, "output_tokens": 10}
    assert usage["functions"]["(top)"] == {**one_big, "cost": 0.01}
    assert usage["functions"]["plan"] == {**one_big, "cost": 0.01}
    assert usage["functions"]["research"] == {
        "calls": 2,
        "input_tokens": 107,
        "cached_tokens": 30,
        "output_tokens": 13,
        "cost": 0.011,
    }
    # what each assistant node stores: fresh input apart from cache reads and writes
    metas = [n.meta for n in session.graph.nodes() if n.role == "assistant"]
    assert metas[0] == {
        "model": "big",
        "usage": {
            "input": 50,
            "cache_read": 30,
            "cache_creation": 20,
            "output": 10,
            "cost": 0.01,
        },
    }


def test_usage_with_unknown_cost_and_reopened(tmp_path: Path) -> None:
    db = tmp_path / "op.db"
    session = Session(db, model=TestModel(["a", "b"]), state_dir=tmp_path / "state")
    session.llm("one")
    session.llm("two")
    usage = Session(db, session.id, state_dir=tmp_path / "state").usage()
    assert usage["total"]["calls"] == 2 and usage["total"]["cost"] is None
    assert list(usage["models"]) == ["test"] and list(usage["functions"]) == ["(top)"]
    assert usage["total"]["input_tokens"] > 0 and usage["total"]["output_tokens"] > 0
    assert texts(session.graph.to_openai()) == ["one", "a", "two", "b"]


# -- policy ------------------------------------------------------------------------------
def test_policy_follows_the_model_by_name_or_object(tmp_path: Path) -> None:
    by_name = Session(":memory:", model="anthropic/claude-sonnet-4-5", state_dir=tmp_path)
    by_object = Session(
        ":memory:", model=LiteLLMModel("anthropic/claude-sonnet-4-5"), state_dir=tmp_path
    )
    assert by_object.policy == by_name.policy
    assert by_object.policy.context_window == 200_000 and by_object.policy.merge_roles
    fake = Session(":memory:", model=TestModel(), state_dir=tmp_path)
    assert fake.policy.model is None and fake.policy.context_window == 128_000
    assert fake.folder.path == tmp_path
