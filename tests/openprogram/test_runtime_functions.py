"""``@openprogram.function``: function nodes per call — input, status, output, nesting,
async calls gathered concurrently, threads, and code run outside any session."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from pathlib import Path
from typing import Any

import pytest
from _runtime_helpers import contents, texts
from pydantic import BaseModel

import openprogram
from graph import TOP, Frame, Node
from openprogram import NoSession, Session, SessionError
from openprogram.testing import FunctionModel, ModelRequest, TestModel


@pytest.fixture
def session(tmp_path: Path) -> Session:
    return Session(":memory:", model=TestModel(default="ok"), state_dir=tmp_path / "state")


def _functions(session: Session) -> list[Node]:
    return [n for n in session.graph.nodes() if n.kind == "function"]


def _own_chain(session: Session, function_id: str) -> list[Node]:
    """The nodes of a function's own chain, oldest first."""
    state = session.graph.state
    ids = state.chain(state.frame_head(function_id), stop=function_id)
    return [state.nodes[i] for i in ids]


class Query(BaseModel):
    text: str
    limit: int = 3


# -- one call ------------------------------------------------------------------------------
def test_input_status_and_output(session: Session) -> None:
    seen: dict[str, Any] = {}

    @openprogram.function
    def search(query: Query, pages: int, verbose: bool = False) -> dict[str, Any]:
        frame = openprogram.current_frame()
        assert frame.function is not None
        seen["status"] = session.graph.get(frame.function).status
        seen["session"] = openprogram.current_session()
        return {"hits": [query.text] * pages}

    with session:
        result = search(Query(text="cache"), 2)
    assert result == {"hits": ["cache", "cache"]}
    assert seen == {"status": "running", "session": session}
    (node,) = _functions(session)
    assert node.payload.name == "search"  # type: ignore[union-attr]
    assert node.payload.input == {  # type: ignore[union-attr]
        "query": {"text": "cache", "limit": 3},
        "pages": 2,
        "verbose": False,
    }
    assert node.payload.expose == "io"  # type: ignore[union-attr]
    assert (node.status, node.output) == ("completed", {"hits": ["cache", "cache"]})
    assert session.graph.state.caller.get(node.id) is None
    assert openprogram.current_frame() == TOP  # unbound again after the block


def test_an_exception_propagates_and_marks_the_node(session: Session) -> None:
    @openprogram.function
    def fails(x: int) -> int:
        raise ValueError(f"bad input {x}")

    with session, pytest.raises(ValueError, match="bad input 7"):
        fails(7)
    (node,) = _functions(session)
    assert node.status == "error"
    assert node.finish is not None and node.finish.error == "ValueError: bad input 7"
    # the session goes on at the top level, after the failed call
    with session:
        session.llm("next")
    assert texts(session.graph.to_openai())[-2:] == ["next", "ok"]
    assert session.graph.state.prev[session.graph.nodes()[-2].id] == node.id


def test_nesting_and_the_llm_calls_inside(tmp_path: Path) -> None:
    def reply(request: ModelRequest) -> str:
        return f"answer to {request.messages[-1]['content']}"

    session = Session(":memory:", model=FunctionModel(reply), state_dir=tmp_path / "state")

    @openprogram.function(expose="full")
    def inner(x: int) -> str:
        return str(openprogram.llm(f"inner {x}"))

    @openprogram.function(name="outer-step")
    def outer() -> str:
        openprogram.llm("outer first")
        value = inner(1)
        openprogram.llm("outer last")
        return value

    with session:
        assert outer() == "answer to inner 1"
    outer_node, inner_node = _functions(session)
    state = session.graph.state
    assert outer_node.payload.name == "outer-step"  # type: ignore[union-attr]
    assert inner_node.payload.expose == "full"  # type: ignore[union-attr]
    assert state.caller[inner_node.id] == outer_node.id
    assert texts([m for n in _own_chain(session, inner_node.id) for m in _messages(n)]) == [
        "inner 1",
        "answer to inner 1",
    ]
    own = _own_chain(session, outer_node.id)
    assert [n.kind for n in own] == ["dialogue", "dialogue", "function", "dialogue", "dialogue"]
    assert own[2].id == inner_node.id
    assert all(state.caller[n.id] == outer_node.id for n in own)
    # the inner call rendered from its frame: the caller's chain, then its own prompt
    model = session.model
    assert isinstance(model, FunctionModel)
    assert contents(model.requests[1].messages) == [
        "outer first",
        "answer to outer first",
        "inner 1",
    ]
    # at the top level, outer is one call with its output; "full" inner shows when opened
    top = session.engine.render(head=session.graph.head).messages
    assert [m["role"] for m in top] == ["assistant", "tool"]
    assert top[1]["content"] == "answer to inner 1"


def _messages(node: Node) -> list[dict[str, Any]]:
    return [{"role": node.role, "content": node.payload.content}]  # type: ignore[union-attr]


def test_expose_modes_shape_what_callers_see(session: Session) -> None:
    @openprogram.function(expose="hidden")
    def hidden() -> str:
        openprogram.llm("hidden work")
        return "secret"

    @openprogram.function(expose="llm")
    def chatty() -> str:
        openprogram.llm("chatty work")
        return "talked"

    with session:
        session.llm("start")
        hidden()
        chatty()
    rendered = session.engine.render(head=session.graph.head).messages
    assert texts(rendered) == ["start", "ok", "chatty work", "ok"]
    with pytest.raises(Exception, match="not one of"), session:
        openprogram.function(expose="everything")(lambda: None)()


# -- async -----------------------------------------------------------------------------------
class Yielding(FunctionModel):
    """A fake whose async calls let other tasks run first (as a real provider call does)."""

    async def acomplete(self, messages: Any, tools: Any = (), **options: Any) -> Any:
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return self.complete(messages, tools, **options)


def test_async_function(session: Session) -> None:
    @openprogram.function
    async def fetch(url: str) -> str:
        await asyncio.sleep(0)
        return str(await openprogram.allm(f"fetch {url}"))

    assert session.run(fetch, "https://example.org") == "ok"
    (node,) = _functions(session)
    assert node.payload.input == {"url": "https://example.org"}  # type: ignore[union-attr]
    assert (node.status, node.output) == ("completed", "ok")
    assert texts([m for n in _own_chain(session, node.id) for m in _messages(n)]) == [
        "fetch https://example.org",
        "ok",
    ]


def test_gathered_siblings_chain_in_start_order_and_never_interleave(tmp_path: Path) -> None:
    def reply(request: ModelRequest) -> str:
        return f"notes on {request.messages[-1]['content']}"

    model = Yielding(reply)
    session = Session(":memory:", model=model, state_dir=tmp_path / "state")

    @openprogram.function
    async def investigate(topic: str) -> str:
        first = await openprogram.allm(f"{topic}: look")
        await asyncio.sleep(0)
        second = await openprogram.allm(f"{topic}: dig")
        return f"{first} / {second}"

    @openprogram.function
    async def study() -> list[str]:
        return list(await asyncio.gather(*(investigate(t) for t in ("alpha", "beta", "gamma"))))

    with session:
        session.llm("plan")
    results = session.run(study)
    assert results == [
        f"notes on {t}: look / notes on {t}: dig" for t in ("alpha", "beta", "gamma")
    ]
    state = session.graph.state
    study_node, *siblings = _functions(session)
    assert [n.payload.input for n in siblings] == [  # type: ignore[union-attr]
        {"topic": "alpha"},
        {"topic": "beta"},
        {"topic": "gamma"},
    ]
    # chained in start order under the caller
    assert state.prev[siblings[0].id] == study_node.id
    assert state.prev[siblings[1].id] == siblings[0].id
    assert state.prev[siblings[2].id] == siblings[1].id
    assert all(state.caller[n.id] == study_node.id for n in siblings)
    assert [n.id for n in _own_chain(session, study_node.id)] == [n.id for n in siblings]
    # each own chain holds only that investigation's turns, in order
    for node in siblings:
        topic = node.payload.input["topic"]  # type: ignore[union-attr]
        own = _own_chain(session, node.id)
        assert all(state.caller[n.id] == node.id for n in own)
        assert contents([m for n in own for m in _messages(n)]) == [
            f"{topic}: look",
            f"notes on {topic}: look",
            f"{topic}: dig",
            f"notes on {topic}: dig",
        ]
    # the turns really interleaved in time, and each render saw only its own insides
    order = [r.messages[-1]["content"] for r in model.requests]
    assert order[:4] == ["plan", "alpha: look", "beta: look", "gamma: look"]
    for request in model.requests[1:]:
        topic = request.messages[-1]["content"].split(":")[0]
        others = {"alpha", "beta", "gamma"} - {topic}
        inside = [m for m in request.messages if m["role"] == "user" and ":" in m["content"]]
        assert not any(m["content"].split(":")[0] in others for m in inside)


def test_with_session_in_concurrent_tasks(tmp_path: Path) -> None:
    one = Session(":memory:", model=TestModel(default="1"), state_dir=tmp_path / "state")
    two = Session(":memory:", model=TestModel(default="2"), state_dir=tmp_path / "state")

    async def task(session: Session, before: int, after: int) -> str:
        with session:
            for _ in range(before):
                await asyncio.sleep(0)
            answer = str(openprogram.llm("which?"))
        for _ in range(after):
            await asyncio.sleep(0)
        with pytest.raises(NoSession):
            openprogram.current_session()
        return answer

    async def both() -> list[str]:
        # the first task leaves its block while the second is still inside the same session's
        return list(await asyncio.gather(task(one, 1, 3), task(one, 3, 0), task(two, 2, 1)))

    assert asyncio.run(both()) == ["1", "1", "2"]
    assert len(one.graph) == 4 and len(two.graph) == 2


def test_nested_with_blocks_restore_the_outer_session(tmp_path: Path) -> None:
    one = Session(":memory:", state_dir=tmp_path / "state")
    two = Session(":memory:", state_dir=tmp_path / "state")
    with one:
        with two:
            assert openprogram.current_session() is two
        assert openprogram.current_session() is one
        with pytest.raises(SessionError, match="entered last"):
            two.__exit__(None, None, None)
    with pytest.raises(NoSession):
        openprogram.current_session()


# -- threads and no session ----------------------------------------------------------------------
def test_threads_with_a_copied_context(session: Session) -> None:
    @openprogram.function
    def work(n: int) -> int:
        session.graph.append({"role": "user", "content": f"work {n}"}, frame=_here())
        return n * n

    @openprogram.function
    def fan_out() -> list[int]:
        results: dict[int, int] = {}
        threads = []
        for n in range(4):
            context = contextvars.copy_context()
            thread = threading.Thread(
                target=lambda n=n, c=context: results.__setitem__(n, c.run(work, n))
            )
            threads.append(thread)
            thread.start()
        for thread in threads:
            thread.join()
        return [results[n] for n in range(4)]

    with session:
        assert fan_out() == [0, 1, 4, 9]
    outer, *workers = _functions(session)
    state = session.graph.state
    assert all(state.caller[w.id] == outer.id for w in workers)
    assert sorted(w.payload.input["n"] for w in workers) == [0, 1, 2, 3]  # type: ignore[union-attr]
    for worker in workers:
        own = _own_chain(session, worker.id)
        n = worker.payload.input["n"]  # type: ignore[union-attr]
        assert [node.payload.content for node in own] == [f"work {n}"]  # type: ignore[union-attr]
        assert worker.output == n * n


def _here() -> Frame:
    return openprogram.current_frame()


def test_a_thread_without_the_context_has_no_session(session: Session) -> None:
    @openprogram.function
    def work() -> int:
        return 1

    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as error:
            errors.append(error)

    with session:
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
    assert len(errors) == 1 and isinstance(errors[0], NoSession)
    assert _functions(session) == []


def test_outside_a_session(tmp_path: Path) -> None:
    @openprogram.function
    def step() -> int:
        return 1

    with pytest.raises(NoSession, match="no session is active"):
        step()
    with pytest.raises(NoSession):
        openprogram.llm("hello")
    with pytest.raises(NoSession):
        asyncio.run(openprogram.allm("hello"))
    assert isinstance(NoSession("x"), SessionError)
    assert openprogram.current_frame() == TOP
