"""The store conformance suite: what every store (memory, SQLite, PostgreSQL) does, case by
case, with the same tests; plus the fault cases: each statement of a write failing in turn
leaves the store exactly as it was, never half written."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from _faults import failing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import graph
from graph import ConversationGraph, Edge, Event, MemoryStore, Node, SQLStore, Store, StoreError

Record = Node | Event


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "memory":
        yield MemoryStore()
        return
    if request.param == "sqlite":
        yield SQLStore(tmp_path / "op.db")
    else:
        yield SQLStore(request.getfixturevalue("pg_db_url"))
    graph.dispose_engines()


def _history(session: str = "s") -> tuple[list[Record], list[Edge], str | None]:
    """Records of a small real session (messages, a tool call and its result, a function),
    with ids of their own on every call."""
    g = ConversationGraph.memory(session)
    g.append({"role": "system", "content": "s"}, meta={"k": [1, 2]})
    g.append({"role": "user", "content": "hi \x00 ünïcode"})
    call = {"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    g.append({"role": "assistant", "content": None, "tool_calls": [call]})
    g.append({"role": "tool", "tool_call_id": "c", "content": "files"})
    with g.function("job", input={"n": 1}) as fn:
        g.append({"role": "assistant", "content": "inside"})
        fn.output = "done"
    records: list[Record] = []
    edges: list[Edge] = []
    for record in g.state.records:
        if isinstance(record, Event):
            records.append(record)
        else:
            records.append(record[0])
            edges.extend(record[1])
    return records, edges, g.head


def _edges_of(records: list[Record], edges: list[Edge]) -> list[Edge]:
    """The edges pointing at these records' nodes (a commit stores its own nodes' edges)."""
    ids = {r.id for r in records if isinstance(r, Node)}
    return [e for e in edges if e.dst in ids]


def _id(record: Record) -> str:
    return record.node_id if isinstance(record, Event) else record.id


def _sorted(edges: Any) -> list[tuple[str, str, str]]:
    return sorted((e.src, e.dst, e.type) for e in edges)


def _flat(loaded: Any) -> list[Any]:
    return [r if isinstance(r, Event) else (r[0], _sorted(r[1])) for r in loaded.records]


def _expected(records: list[Record], edges: list[Edge], first: int = 1) -> list[Any]:
    out: list[Any] = []
    for offset, record in enumerate(records):
        stored = msgspec.structs.replace(record, seq=first + offset)
        if isinstance(stored, Event):
            out.append(stored)
        else:
            out.append((stored, _sorted(e for e in edges if e.dst == stored.id)))
    return out


def _snapshot(store: Store, sessions: tuple[str, ...] = ("s", "t", "u")) -> Any:
    """Everything a store holds for these sessions, comparable with ``==``."""
    listed = sorted((info.id, info.nodes) for info in store.sessions() if info.id in sessions)
    per = {
        name: (
            _flat(store.load(name)),
            store.load(name).head,
            store.session_meta(name),
            store.get_values(name, "ns"),
            store.read_log(name, "log"),
            store.leases(name),
        )
        for name in sessions
    }
    return listed, per


# -- append, batch, load -------------------------------------------------------------------
def test_commit_and_load(store: Store) -> None:
    records, edges, head = _history()
    assert store.commit("s", records[:3], _edges_of(records[:3], edges), _id(records[2])) == 1
    assert store.commit("s", records[3:], _edges_of(records[3:], edges), head) == 4
    loaded = store.load("s")
    assert _flat(loaded) == _expected(records, edges)
    assert loaded.head == head
    assert _flat(store.load("s", after=3)) == _expected(records, edges)[3:]
    assert store.load("s", after=len(records)).records == []
    nobody = store.load("nobody")
    assert nobody.records == [] and nobody.head is None


def test_a_batch_is_one_transaction_with_consecutive_seqs(store: Store) -> None:
    records, edges, _ = _history()
    with store.transaction():
        firsts = [
            store.commit("s", [record], _edges_of([record], edges), _id(record))
            for record in records
        ]
    assert firsts == list(range(1, len(records) + 1))
    assert _flat(store.load("s")) == _expected(records, edges)


def test_two_sessions_count_seqs_apart(store: Store) -> None:
    records, _, _ = _history("s")
    other, _, _ = _history("t")
    store.commit("s", records[:2], [], None)
    store.commit("t", other[:1], [], None)
    assert [r[0].seq for r in store.load("t").records] == [1]  # type: ignore[index]
    assert store.commit("s", records[2:3], [], None) == 3


# -- sessions ------------------------------------------------------------------------------
def test_sessions_are_made_by_their_first_write(store: Store) -> None:
    assert store.sessions() == [] and not store.has_session("s")
    assert store.session_meta("s") == {}
    assert store.load("s").records == []
    assert store.get_values("s", "ns") == {} and store.read_log("s", "log") == []
    assert store.sessions() == []  # reading creates nothing
    store.commit("s", _history("s")[0][:2], [], None)
    assert not store.ensure_session("t") and store.ensure_session("t")
    listed = store.sessions()
    assert [(info.id, info.nodes) for info in listed] == [("s", 2), ("t", 0)]
    assert listed[0].created <= listed[1].created
    assert store.has_session("s") and store.has_session("t")


def test_session_meta(store: Store) -> None:
    assert store.update_session_meta("s", {"a": {"x": 1}}) == {"a": {"x": 1}}
    assert store.update_session_meta("s", {"b": [1, "2"]}) == {"a": {"x": 1}, "b": [1, "2"]}
    assert store.update_session_meta("s", {"a": None}) == {"a": None, "b": [1, "2"]}
    assert store.session_meta("s") == {"a": None, "b": [1, "2"]}
    assert store.session_meta("t") == {}
    with pytest.raises(graph.InvalidMessage):
        store.update_session_meta("s", {"bad": "\ud800"})
    assert store.session_meta("s") == {"a": None, "b": [1, "2"]}


def test_delete_a_session(store: Store) -> None:
    first = ""
    for name in ("s", "t"):
        records, edges, head = _history(name)
        first = first or _id(records[0])
        store.commit(name, records, edges, head)
        store.update_session_meta(name, {"k": name})
        store.put_values(name, "ns", {"a": "1"})
        store.append_log(name, "log", [("e", "body")], 1)
        store.put_lease(name, "f", "owner", 10)
    kept = _snapshot(store, ("t",))
    store.delete_session("s")
    assert _snapshot(store, ("t",)) == kept
    assert not store.has_session("s") and store.load("s").records == []
    assert store.get_values("s", "ns") == {} and store.read_log("s", "log") == []
    assert store.leases("s") == {} and store.session_meta("s") == {}
    assert store.session_of(first) is None
    store.delete_session("s")  # deleting twice is fine
    assert [info.id for info in store.sessions()] == ["t"]


def test_a_session_deleted_in_a_transaction_is_made_again_by_its_next_commit(
    store: Store,
) -> None:
    """The seqs a transaction held for a session go with its row: the next commit makes
    the session again, numbered from 1 (hypothesis found the SQL store skipping that)."""
    records, _, _ = _history("s")
    with store.transaction():
        store.commit("s", records[:2], [], _id(records[1]))
        store.delete_session("s")
        assert store.commit("s", records[2:3], [], _id(records[2])) == 1
    assert [(info.id, info.nodes) for info in store.sessions()] == [("s", 1)]
    assert [r[0].id for r in store.load("s").records] == [_id(records[2])]  # type: ignore[index]


def test_session_of(store: Store) -> None:
    records, edges, head = _history()
    store.commit("s", records, edges, head)
    assert store.session_of(_id(records[0])) == "s"
    assert store.session_of("01NOSUCHNODE00000000000000") is None


# -- side tables, logs, leases -------------------------------------------------------------
def test_side_values(store: Store) -> None:
    store.put_values("s", "ns", {"a": "1", "b": "2"})
    store.put_values("s", "ns", {"b": "3", "c": ""})
    store.put_values("s", "other", {"a": "x"})
    store.put_values("t", "ns", {"a": "t"})
    assert store.get_values("s", "ns") == {"a": "1", "b": "3", "c": ""}
    assert store.get_values("s", "ns", ["b", "zz"]) == {"b": "3"}
    assert store.get_values("s", "ns", []) == {}
    assert store.get_values("s", "other") == {"a": "x"}
    assert store.get_values("t", "ns") == {"a": "t"}
    many = {f"k{i}": str(i) for i in range(1_200)}  # more keys than one IN list holds
    store.put_values("s", "many", many)
    assert store.get_values("s", "many", list(many)) == many
    assert store.sessions() == []  # side data alone makes no session


def test_logs(store: Store) -> None:
    store.append_log("s", "log", [("a", "1"), ("b", "2")], 5)
    store.append_log("s", "log", [("a", "again"), ("c", "3")], 7)  # a retry skips "a"
    store.append_log("s", "other", [("a", "x")], 1)
    entries = [(e.key, e.seq, e.body) for e in store.read_log("s", "log")]
    assert entries == [("a", 5, "1"), ("b", 5, "2"), ("c", 7, "3")]
    assert [e.key for e in store.read_log("s", "other")] == ["a"]
    assert store.read_log("t", "log") == []


def test_leases(store: Store) -> None:
    store.put_lease("s", "f1", "me", 10)
    store.put_lease("s", "f2", "you", 20)
    assert store.leases("s") == {"f1": ("me", 10), "f2": ("you", 20)}
    assert store.renew_lease("s", "f1", "me", 30)
    assert not store.renew_lease("s", "f2", "me", 40)  # not mine: a heartbeat takes nothing
    assert not store.renew_lease("s", "f1", "them", 50, previous="you")  # a stale claim
    assert store.renew_lease("s", "f1", "them", 50, previous="me")
    assert not store.renew_lease("s", "gone", "me", 1)
    store.drop_lease("s", "f2")
    store.drop_lease("s", "never")
    assert store.leases("s") == {"f1": ("them", 50)}
    assert store.leases("t") == {}


# -- transactions --------------------------------------------------------------------------
def _prepare(store: Store) -> None:
    """What the store holds before the blocks under test: one session with some of each."""
    records, _, _ = _history("s")
    store.commit("s", records[:1], [], _id(records[0]))
    store.update_session_meta("s", {"before": 1})
    store.put_values("s", "ns", {"a": "1"})
    store.append_log("s", "log", [("r1", "first")], 1)
    store.put_lease("s", "old", "you", 5)


def _everything(store: Store) -> None:
    """One write of each kind, into the existing session and into a new one."""
    records, edges, head = _history("s")
    new, new_edges, new_head = _history("t")
    store.commit("s", records[:3], _edges_of(records[:3], edges), None)
    store.commit("t", new, new_edges, new_head)
    store.commit("s", records[3:], _edges_of(records[3:], edges), head)
    store.update_session_meta("t", {"done": True})
    store.put_values("s", "ns", {"a": "2", "new": "x"})
    store.append_log("s", "log", [("r2", "second")], 9)
    store.put_lease("s", "f", "me", 99)
    store.drop_lease("s", "old")


def test_a_transaction_that_raises_leaves_nothing(store: Store) -> None:
    _prepare(store)
    before = _snapshot(store)
    with pytest.raises(RuntimeError), store.transaction():
        _everything(store)
        raise RuntimeError("abort")
    assert _snapshot(store) == before
    with store.transaction():
        _everything(store)
    assert _snapshot(store) != before


def test_a_failed_savepoint_undoes_only_its_own_writes(store: Store) -> None:
    _prepare(store)
    with store.transaction():
        store.commit("s", _history("s")[0][:1], [], None)
        store.put_values("s", "ns", {"outer": "1"})
        kept = _snapshot(store)
        with pytest.raises(RuntimeError), store.transaction():
            _everything(store)
            raise RuntimeError("inner")
        assert _snapshot(store) == kept
    assert _snapshot(store) == kept
    assert store.get_values("s", "ns")["outer"] == "1"


def test_a_refused_record_fails_its_whole_batch(store: Store) -> None:
    _prepare(store)
    before = _snapshot(store)
    records, _, _ = _history("s")
    taken = store.load("s").records[0]
    assert isinstance(taken, tuple)
    again = msgspec.structs.replace(records[0], id=taken[0].id)  # a node id already stored
    with pytest.raises(StoreError), store.transaction():
        store.commit("s", records[1:], [], None)
        store.commit("t", [again], [], None)
    assert _snapshot(store) == before
    with pytest.raises(StoreError):
        store.commit("t", [records[0], again], [], None)
    assert _snapshot(store) == before


def test_a_write_guard_runs_inside_the_commit_transaction(store: Store) -> None:
    _prepare(store)
    before = _snapshot(store)
    seen: list[dict[str, tuple[str, int]]] = []

    def guard(session: str, records: Any, edges: Any) -> None:
        seen.append(store.leases(session))
        if session == "t":
            raise StoreError("refused by the guard")

    store.add_write_guard(guard)
    records, edges, head = _history("t")
    with pytest.raises(StoreError, match="refused by the guard"):
        store.commit("t", records, edges, head)
    assert _snapshot(store) == before
    with pytest.raises(StoreError, match="refused by the guard"), store.transaction():
        store.put_lease("s", "g", "me", 1)
        store.commit("s", _history("s")[0][:1], [], None)  # the guard reads the new lease
        store.commit("t", records, edges, head)
    assert seen[-2] == {"old": ("you", 5), "g": ("me", 1)}
    assert _snapshot(store) == before
    store.remove_write_guard(guard)
    store.commit("t", records, edges, head)
    assert store.has_session("t")


# -- faults: each statement fails in turn --------------------------------------------------
def _fails_in_turn(store: Store, write: Callable[[], None]) -> int:
    """Run ``write`` with its 1st, 2nd, … statement failing: after each failure the store
    is exactly as before; return how many statements the write took once it ran through."""
    before = _snapshot(store)
    fail_at = 1
    while True:
        with failing(store, fail_at) as faults:
            try:
                write()
            except StoreError as error:
                if not faults.failed:
                    raise
                assert "injected fault" in str(error)
                assert _snapshot(store) == before, f"statement {fail_at} left a half write"
                fail_at += 1
                continue
        assert not faults.failed
        return faults.seen


def test_each_statement_of_a_batch_failing_leaves_nothing(store: Store) -> None:
    _prepare(store)

    def batch() -> None:
        with store.transaction():
            _everything(store)

    assert _fails_in_turn(store, batch) >= 8  # each write of the batch reached the store
    assert [info.id for info in store.sessions()] == ["s", "t"]
    assert store.session_meta("t") == {"done": True}
    assert store.leases("s") == {"f": ("me", 99)}


def test_each_statement_of_a_single_commit_failing_leaves_nothing(store: Store) -> None:
    _prepare(store)
    records, edges, head = _history("u")
    assert _fails_in_turn(store, lambda: store.commit("u", records, edges, head)) >= 1
    assert _flat(store.load("u")) == _expected(records, edges)  # a new session, row and all


def test_each_statement_of_a_meta_update_failing_leaves_nothing(store: Store) -> None:
    _prepare(store)
    assert _fails_in_turn(store, lambda: store.update_session_meta("t", {"x": 1})) >= 1
    assert store.session_meta("t") == {"x": 1}


def test_each_statement_of_a_delete_failing_leaves_nothing(store: Store) -> None:
    _prepare(store)
    assert _fails_in_turn(store, lambda: store.delete_session("s")) >= 1
    assert store.sessions() == [] and store.get_values("s", "ns") == {}


# -- a copy of a database is another database --------------------------------------------
def _copy_of(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[str, str]:
    """An original database with a session, and a copy of it as a user makes one: ``cp``
    of a SQLite file, ``CREATE DATABASE … TEMPLATE`` on PostgreSQL (both copy the UUID)."""
    import shutil

    from sqlalchemy import make_url

    from tests import _postgres

    if kind == "sqlite":
        original, copy = tmp_path / "agent.db", tmp_path / "experiment.db"
        ConversationGraph.open(original, session="s").append({"role": "user", "content": "x"})
        graph.dispose_engines()  # checkpointed: the file alone holds everything
        shutil.copy(original, copy)
        return str(original), str(copy)
    server: str = request.getfixturevalue("pg_url")
    url: str = request.getfixturevalue("pg_db_url")
    ConversationGraph.open(url, session="s").append({"role": "user", "content": "x"})
    graph.dispose_engines()  # a template may have no connection open
    name = make_url(url).database
    _postgres._admin_execute(server, f'CREATE DATABASE "{name}_copy" TEMPLATE "{name}"')
    copy = _postgres.with_database(server, f"{name}_copy")
    request.addfinalizer(lambda: _postgres.drop_database(server, copy))
    return url, copy


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_copied_database_never_shares_its_originals_state_folder(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    from context import ForeignStateFolder, adopt_state_folder, state_folder

    monkeypatch.setenv("OPENPROGRAM_STATE_HOME", str(tmp_path / "registry"))
    original_url, copy_url = _copy_of(kind, tmp_path, request)
    original, copy = SQLStore(original_url), SQLStore(copy_url)
    try:
        mine = state_folder(original)
        mine.claim()
        assert state_folder(copy).path != mine.path  # by default: a folder of its own
        with pytest.raises(ForeignStateFolder):  # and the original's, named, is refused
            state_folder(copy, mine.path)
        assert state_folder(original).path == mine.path  # the original keeps it
        before = copy.database_id()
        done = adopt_state_folder(copy, rekey=True)  # a copy made its own on purpose
        assert done.database == copy.database_id() != before
        assert copy.database_id() != original.database_id()
        with pytest.raises(ForeignStateFolder):
            state_folder(copy, mine.path)
        assert state_folder(original).path == mine.path
    finally:
        original.close()
        copy.close()
        graph.dispose_engines()


# -- property: the memory store and SQLite agree on any sequence of writes -----------------
_SESSIONS = st.sampled_from(["s", "t"])
_WRITE = st.one_of(
    st.tuples(st.just("commit"), _SESSIONS, st.integers(1, 3)),
    st.tuples(st.just("values"), _SESSIONS, st.sampled_from(["a", "b"]), st.text(max_size=3)),
    st.tuples(st.just("log"), _SESSIONS, st.sampled_from(["a", "b", "c"]), st.integers(0, 9)),
    st.tuples(st.just("meta"), _SESSIONS, st.sampled_from(["a", "b"]), st.integers(0, 9)),
    st.tuples(st.just("lease"), _SESSIONS, st.sampled_from(["f", "g"]), st.sampled_from("xy")),
    st.tuples(st.just("renew"), _SESSIONS, st.sampled_from(["f", "g"]), st.sampled_from("xy")),
    st.tuples(st.just("drop"), _SESSIONS, st.sampled_from(["f", "g"])),
    st.tuples(st.just("delete"), _SESSIONS),
)
_STEP = st.one_of(
    _WRITE,
    st.tuples(st.just("abort"), st.lists(_WRITE, min_size=1, max_size=4)),
    st.tuples(st.just("batch"), st.lists(_WRITE, min_size=1, max_size=4)),
)


class _Applier:
    """Applies generated writes; node records are made once per step and shared, so both
    stores get the very same ids."""

    def __init__(self) -> None:
        self.made: dict[Any, list[Record]] = {}

    def records(self, key: Any, session: str, count: int) -> list[Record]:
        if key not in self.made:
            g = ConversationGraph.memory(session)
            for index in range(count):
                g.append({"role": "user", "content": f"{key}-{index}"})
            self.made[key] = [r[0] for r in g.state.records if not isinstance(r, Event)]
        return [msgspec.structs.replace(r, session=session) for r in self.made[key]]

    def write(self, store: Store, key: Any, step: tuple[Any, ...]) -> None:
        kind, session = step[0], step[1]
        if kind == "commit":
            records = self.records(key, session, step[2])
            store.commit(session, records, [], _id(records[-1]))
        elif kind == "values":
            store.put_values(session, "ns", {step[2]: step[3]})
        elif kind == "log":
            store.append_log(session, "log", [(step[2], f"body {step[3]}")], step[3])
        elif kind == "meta":
            store.update_session_meta(session, {step[2]: step[3]})
        elif kind == "lease":
            store.put_lease(session, step[2], step[3], 10)
        elif kind == "renew":
            store.renew_lease(session, step[2], step[3], 20)
        elif kind == "drop":
            store.drop_lease(session, step[2])
        else:
            store.delete_session(session)

    def step(self, store: Store, key: int, step: tuple[Any, ...]) -> None:
        if step[0] not in ("abort", "batch"):
            self.write(store, key, step)
            return
        try:
            with store.transaction():
                for offset, write in enumerate(step[1]):
                    self.write(store, (key, offset), write)
                if step[0] == "abort":
                    raise _Abort
        except _Abort:
            pass


class _Abort(Exception):
    pass


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(_STEP, max_size=12))
def test_memory_and_sqlite_agree(tmp_path: Path, steps: list[tuple[Any, ...]]) -> None:
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    memory, sqlite = MemoryStore(), SQLStore(folder / "op.db")
    applier = _Applier()
    try:
        for key, step in enumerate(steps, start=1):
            for store in (memory, sqlite):
                applier.step(store, key, step)
            assert _snapshot(memory) == _snapshot(sqlite), step
    finally:
        graph.dispose_engines()
