"""The LLM loop on fake models: tools (and parallel ones), errors the model reads, the step
limit, structured output with one repair turn, usage, what the model is sent, overrides."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from _runtime_helpers import as_sent, contents, texts
from pydantic import BaseModel

import openprogram
from context import ContextOverflowError
from openprogram import (
    HISTORY_TOOLS,
    ModelError,
    ModelResponse,
    OutputValidationError,
    Session,
    StepLimitExceeded,
    ToolDefinitionError,
    Usage,
)
from openprogram.testing import FunctionModel, ModelRequest, TestModel, override, tool_call

OVERFLOW = "prompt is too long: 210000 tokens > 200000 maximum"


def _session(tmp_path: Path, model: Any = None, **kwargs: Any) -> Session:
    return Session(":memory:", model=model, state_dir=tmp_path / "state", **kwargs)


def add(a: int, b: int = 0) -> int:
    """Add two numbers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"kaboom: {reason}")


def _tools(session: Session) -> list[tuple[str, str, str | None, bool]]:
    """Every tool node: (name, arguments, result, is_error)."""
    found = []
    for node in session.graph.nodes():
        if node.kind == "tool":
            result = node.result
            content = None if result is None else result.content
            found.append(
                (
                    node.payload.name,  # type: ignore[union-attr]
                    node.payload.arguments,  # type: ignore[union-attr]
                    content if isinstance(content, str) or content is None else str(content),
                    bool(result and result.is_error),
                )
            )
    return found


# -- tools ---------------------------------------------------------------------------------
def test_tool_calls_are_run_and_recorded_in_order(tmp_path: Path) -> None:
    model = TestModel(
        [
            {"content": "adding", "tool_calls": [tool_call("add", {"a": 2, "b": 3}, id="c1")]},
            {"tool_calls": [tool_call("add", {"a": 5}, id="c2")]},
            "The sum is 5.",
        ]
    )
    session = _session(tmp_path, model, system="sys")
    assert session.llm("Add 2 and 3.", tools=[add]) == "The sum is 5."
    assert _tools(session) == [
        ("add", '{"a": 2, "b": 3}', "5", False),
        ("add", '{"a": 5}', "5", False),
    ]
    assert texts(session.graph.to_openai()) == [
        "sys",
        "Add 2 and 3.",
        'adding add({"a": 2, "b": 3})',
        "5",
        'add({"a": 5})',
        "5",
        "The sum is 5.",
    ]
    # each request holds the results of the calls before it
    assert model.requests[1].last == {"role": "tool", "tool_call_id": "c1", "content": "5"}
    assert model.requests[2].last == {"role": "tool", "tool_call_id": "c2", "content": "5"}
    tool_nodes = [n for n in session.graph.nodes() if n.kind == "tool"]
    assistants = [n for n in session.graph.nodes() if n.role == "assistant"]
    assert session.graph.state.requested_by[tool_nodes[0].id] == assistants[0].id


def test_parallel_tool_calls_run_together_and_answer_in_call_order(tmp_path: Path) -> None:
    barrier = threading.Barrier(3, timeout=10)
    threads: set[str] = set()

    def slow(n: int) -> str:
        """Waits for the other calls (so it only returns when all run at once)."""
        threads.add(threading.current_thread().name)
        barrier.wait()
        return f"slow {n}"

    calls = [tool_call("slow", {"n": n}, id=f"p{n}") for n in (3, 1, 2)]
    model = TestModel([{"tool_calls": calls}, "all done"])
    session = _session(tmp_path, model)
    assert session.llm("go", tools=[slow]) == "all done"
    assert len(threads) == 3
    assert _tools(session) == [
        ("slow", '{"n": 3}', "slow 3", False),
        ("slow", '{"n": 1}', "slow 1", False),
        ("slow", '{"n": 2}', "slow 2", False),
    ]
    assert [m.get("tool_call_id") for m in model.requests[1].messages[-3:]] == ["p3", "p1", "p2"]


def test_async_tools_are_gathered(tmp_path: Path) -> None:
    started = asyncio.Event

    async def wait_for(name: str) -> str:
        """Waits until the other call has started."""
        events[name].set()
        other = "b" if name == "a" else "a"
        await asyncio.wait_for(events[other].wait(), timeout=10)
        return f"{name} saw {other}"

    def plain(x: int) -> int:
        """A sync tool (runs in a worker thread)."""
        return x + 1

    events: dict[str, asyncio.Event] = {}
    calls = [
        tool_call("wait_for", {"name": "a"}, id="a"),
        tool_call("plain", {"x": 1}, id="p"),
        tool_call("wait_for", {"name": "b"}, id="b"),
    ]
    model = TestModel([{"tool_calls": calls}, "ok"])
    session = _session(tmp_path, model)

    async def main() -> Any:
        events.update(a=started(), b=started())
        return await session.allm("go", tools=[wait_for, plain])

    assert asyncio.run(main()) == "ok"
    assert _tools(session) == [
        ("wait_for", '{"name": "a"}', "a saw b", False),
        ("plain", '{"x": 1}', "2", False),
        ("wait_for", '{"name": "b"}', "b saw a", False),
    ]


def test_tool_errors_are_results_the_model_reads(tmp_path: Path) -> None:
    calls = [
        tool_call("explode", {"reason": "disk"}, id="e1"),
        tool_call("missing", {}, id="e2"),
        tool_call("add", {"a": "many"}, id="e3"),
        tool_call("add", "{not json", id="e4"),
        tool_call("add", "[1, 2]", id="e5"),
    ]
    model = TestModel([{"tool_calls": calls}, "recovered"])
    session = _session(tmp_path, model, history_tools=False)
    assert session.llm("try", tools=[add, explode]) == "recovered"
    results = _tools(session)
    assert [r[3] for r in results] == [True] * 5
    assert results[0][2] == "Error: kaboom: disk"
    assert results[1][2] == "Error: no tool named 'missing'; available: add, explode"
    assert results[2][2] == (
        "Error: invalid arguments: a: Input should be a valid integer, unable to parse string "
        "as an integer"
    )
    assert str(results[3][2]).startswith("Error: arguments are not JSON")
    assert results[4][2] == "Error: arguments must be a JSON object"
    sent = model.requests[1].messages[-5:]
    assert [m["content"] for m in sent] == [r[2] for r in results]


def test_step_limit(tmp_path: Path) -> None:
    loop = {"tool_calls": [tool_call("add", {"a": 1})]}
    session = _session(tmp_path, TestModel(default=loop), max_steps=3)
    with pytest.raises(StepLimitExceeded) as error:
        session.llm("loop forever", tools=[add])
    assert str(error.value) == (
        "llm() in the top level took 3 model turns without a final answer; raise max_steps "
        "or give the model fewer tools to loop on"
    )
    assert len([n for n in session.graph.nodes() if n.role == "assistant"]) == 3
    assert [r[2] for r in _tools(session)] == ["1", "1", "1"]  # every call was answered

    @openprogram.function
    def agent() -> Any:
        return openprogram.llm("again", tools=[add], max_steps=2)

    with (
        session,
        pytest.raises(StepLimitExceeded, match=r"function 'agent' \(node \w+\) took 2 model"),
    ):
        agent()
    node = next(n for n in session.graph.nodes() if n.kind == "function")
    assert node.status == "error" and "StepLimitExceeded" in str(node.finish.error)  # type: ignore[union-attr]


# -- structured output -----------------------------------------------------------------------
class Verdict(BaseModel):
    bug: str
    line: int


def test_structured_output(tmp_path: Path) -> None:
    model = TestModel(['```json\n{"bug": "off by one", "line": 12}\n```', " [1, 2, 3] "])
    session = _session(tmp_path, model)
    verdict = session.llm("Find the bug.", output_type=Verdict)
    assert verdict == Verdict(bug="off by one", line=12)
    format_ = model.requests[0].options["response_format"]
    assert format_["type"] == "json_schema"
    assert format_["json_schema"]["schema"]["required"] == ["bug", "line"]
    assert session.llm("Which lines?", output_type=list[int]) == [1, 2, 3]
    assert model.requests[1].options["response_format"]["json_schema"]["schema"] == {
        "items": {"type": "integer"},
        "type": "array",
    }


def test_one_repair_turn(tmp_path: Path) -> None:
    model = TestModel(["It is on line twelve.", '{"bug": "off by one", "line": 12}'])
    session = _session(tmp_path, model)
    assert session.llm("Find the bug.", output_type=Verdict) == Verdict(bug="off by one", line=12)
    assert len(model.requests) == 2
    repair = model.requests[1].last
    assert repair["role"] == "user"
    assert repair["content"].startswith("Your reply did not match the required output: value:")
    assert '"required": ["bug", "line"]' in repair["content"]
    assert contents(model.requests[1].messages) == [
        "Find the bug.",
        "It is on line twelve.",
        repair["content"],
    ]


def test_a_second_bad_answer_raises(tmp_path: Path) -> None:
    model = TestModel(['{"bug": "x"}', '{"bug": "x", "line": "twelve"}', "never asked"])
    session = _session(tmp_path, model)
    with pytest.raises(OutputValidationError, match="after a repair turn") as error:
        session.llm("Find the bug.", output_type=Verdict)
    assert isinstance(error.value, ValueError)
    assert len(model.requests) == 2
    assert "line: Field required" in model.requests[1].last["content"]
    assert model.script == ["never asked"]


# -- usage, what is sent ---------------------------------------------------------------------
def test_usage_anchors_the_engine(tmp_path: Path) -> None:
    def reply(request: ModelRequest) -> ModelResponse:
        usage = Usage(input_tokens=int(session.engine.last.tokens * 1.5), output_tokens=4)  # type: ignore[union-attr]
        return ModelResponse({"role": "assistant", "content": "ok"}, usage, model="m")

    session = _session(tmp_path, FunctionModel(reply), system="sys")
    assert session.engine.anchor.reports == 0
    session.llm("one")
    session.llm("two")
    assert session.engine.anchor.reports == 2
    assert session.engine.anchor.ratio == pytest.approx(1.5, abs=0.1)
    # a reply without input tokens does not anchor
    session.llm("three", model=TestModel([ModelResponse({"role": "assistant", "content": "x"})]))
    assert session.engine.anchor.reports == 2


def test_the_model_sees_exactly_the_render(tmp_path: Path) -> None:
    seen: list[tuple[bool, bool]] = []

    def reply(request: ModelRequest) -> Any:
        rendered = session.engine.last
        assert rendered is not None
        seen.append(
            (request.messages == as_sent(rendered.messages), request.tools == session.engine.tools)
        )
        if len(seen) == 1:
            return {"tool_calls": [tool_call("add", {"a": 1, "b": 2})]}
        return "3"

    session = _session(tmp_path, FunctionModel(reply), system="sys")
    assert session.llm("add", tools=[add]) == "3"
    assert seen == [(True, True), (True, True)]
    model = session.model
    assert isinstance(model, FunctionModel)
    assert model.requests[0].tool_names == ["add", *HISTORY_TOOLS]
    schema = model.requests[0].tools[0]["function"]
    assert schema["description"] == "Add two numbers."
    assert schema["parameters"]["properties"]["a"] == {
        "description": "the first number",
        "title": "A",
        "type": "integer",
    }
    assert schema["parameters"]["required"] == ["a"]


def test_history_tools_can_be_turned_off(tmp_path: Path) -> None:
    model = TestModel(["a", "b"])
    session = _session(tmp_path, model, history_tools=False)
    session.llm("no tools")
    session.llm("one tool", tools=[add])
    assert [r.tool_names for r in model.requests] == [[], ["add"]]
    # a tool of the caller's own with a history tool's name wins over it
    on = _session(tmp_path, TestModel(["c"]))

    def read_output(id: str) -> str:
        """Mine."""
        return id

    on.llm("mine", tools=[read_output])
    request = on.model.requests[0]  # type: ignore[union-attr]
    assert request.tool_names == ["read_output", *(t for t in HISTORY_TOOLS if t != "read_output")]
    assert request.tools[0]["function"]["description"] == "Mine."


def test_override_replaces_every_model(tmp_path: Path) -> None:
    configured = TestModel(default="configured")
    passed = TestModel(default="passed")
    session = _session(tmp_path, configured)

    @openprogram.function
    def program() -> list[str]:
        return [openprogram.llm("a"), openprogram.llm("b", model=passed)]

    with override(model=TestModel(["fake a", "fake b"])) as fake, session:
        assert program() == ["fake a", "fake b"]
    assert len(fake.requests) == 2  # type: ignore[attr-defined]
    assert configured.requests == [] and passed.requests == []
    with session:
        assert program() == ["configured", "passed"]


# -- model failures --------------------------------------------------------------------------
def test_a_call_that_cannot_run_records_nothing(tmp_path: Path) -> None:
    session = _session(tmp_path)
    with pytest.raises(ModelError, match="no model"):
        session.llm("hi")

    def untyped(x):  # type: ignore[no-untyped-def]
        return x

    session.model = TestModel(["hello"])
    with pytest.raises(ToolDefinitionError, match="needs a type hint"):
        session.llm("hi", tools=[untyped])
    assert len(session.graph) == 0
    assert session.llm("hi") == "hello"
    assert texts(session.graph.to_openai()) == ["hi", "hello"]


def test_a_provider_error_is_a_model_error(tmp_path: Path) -> None:
    failure = ConnectionError("connection reset")
    session = _session(tmp_path, TestModel([failure]))
    with pytest.raises(ModelError, match="model test failed: connection reset") as error:
        session.llm("hi")
    assert error.value.__cause__ is failure
    assert [n.role for n in session.graph.nodes()] == ["user"]


def test_a_fake_that_runs_out_fails_the_test_not_the_provider(tmp_path: Path) -> None:
    session = _session(tmp_path, TestModel(["only one"]))
    assert session.llm("one") == "only one"
    with pytest.raises(AssertionError, match="TestModel ran out of replies after 1"):
        session.llm("two")

    def checks(request: ModelRequest) -> str:
        assert request.tools == [], "expected no tools"
        return "fine"

    with pytest.raises(AssertionError, match="expected no tools"):
        _session(tmp_path, FunctionModel(checks)).llm("x")


def test_an_overflow_renders_harder_and_retries(tmp_path: Path) -> None:
    model = TestModel([ValueError(OVERFLOW), "fits now"])
    session = _session(tmp_path, model, system="sys", budget=3_000)
    for n in range(6):
        session.graph.append({"role": "user", "content": f"question {n} " + "word " * 150})
        session.graph.append({"role": "assistant", "content": f"answer {n} " + "word " * 150})
    assert session.llm("last question") == "fits now"
    first, second = (len(r.messages) for r in model.requests)
    assert second < first
    records = [r for r in session.engine.records() if r.tier == "reactive"]
    assert len(records) == 1
    assert records[0].tokens_after < records[0].tokens_before
    assert records[0].details["reported"] == [210_000, 200_000]
    assert session.engine.failures == 0  # the success reset the count


def test_three_overflows_in_a_row_give_up(tmp_path: Path) -> None:
    model = TestModel([ValueError(OVERFLOW)] * 3 + ["never"])
    session = _session(tmp_path, model)
    with pytest.raises(ContextOverflowError, match="3 times in a row"):
        session.llm("hi")
    assert len(model.requests) == 3


def test_async_loop(tmp_path: Path) -> None:
    model = TestModel(
        [{"tool_calls": [tool_call("add", {"a": 4, "b": 4})]}, ValueError(OVERFLOW), "8"]
    )
    session = _session(tmp_path, model)

    @openprogram.function
    async def agent() -> Any:
        return await openprogram.allm("add 4 and 4", tools=[add])

    assert session.run(agent) == "8"
    assert _tools(session) == [("add", '{"a": 4, "b": 4}', "8", False)]
    assert [r.tier for r in session.engine.records()] == ["reactive"]


def test_a_tool_that_runs_an_agentic_function_spawns_it(tmp_path: Path) -> None:
    @openprogram.function
    def research(topic: str) -> str:
        return str(openprogram.llm(f"research {topic}"))

    def delegate(topic: str) -> str:
        """Hand a topic to a sub-agent."""
        return research(topic)

    calls = [tool_call("delegate", {"topic": t}, id=f"d{t}") for t in ("x", "y")]

    def reply(request: ModelRequest) -> Any:
        last = request.messages[-1]["content"]
        if last == "split the work":
            return {"tool_calls": calls}
        if last.startswith("research"):
            return f"findings on {last[-1]}"
        return "merged"

    session = _session(tmp_path, FunctionModel(reply))
    assert session.llm("split the work", tools=[delegate]) == "merged"
    state = session.graph.state
    tools = [n for n in session.graph.nodes() if n.kind == "tool"]
    functions = [n for n in session.graph.nodes() if n.kind == "function"]
    assert sorted(f.output for f in functions) == ["findings on x", "findings on y"]
    spawned = {state.spawned_by[f.id]: f.output for f in functions}
    assert spawned == {t.id: t.result.content for t in tools}  # type: ignore[union-attr]
    assert [t.result.content for t in tools] == ["findings on x", "findings on y"]  # type: ignore[union-attr]
    # the call's chain runs through both functions; their io is the tools' results
    assert all(state.caller.get(f.id) is None for f in functions)
    chain = [state.nodes[i] for i in state.chain(session.graph.head)]
    assert [n.kind for n in chain] == ["dialogue", "dialogue", "function", "function", "dialogue"]
    assert {n.id for n in chain[2:4]} == {f.id for f in functions}
    final = session.model.requests[-1]  # type: ignore[union-attr]
    assert texts(final.messages) == [
        "split the work",
        'delegate({"topic": "x"}) delegate({"topic": "y"})',
        "findings on x",
        "findings on y",
    ]


class Answer(BaseModel):
    total: int


def test_llm_and_allm_are_one_loop(tmp_path: Path) -> None:
    """Tools, an overflow retried, a repair turn: the sync and async calls send the same
    requests and store the same conversation (they drive one loop)."""

    def script() -> list[Any]:
        return [
            {
                "tool_calls": [
                    tool_call("add", {"a": 1, "b": 2}, id="c1"),
                    tool_call("nope", id="c2"),
                ]
            },
            ValueError(OVERFLOW),
            "not json",
            '{"total": 3}',
        ]

    def stored(session: Session) -> list[tuple[str | None, str]]:
        return [(n.role, str(n.payload)) for n in session.graph.nodes() if n.kind != "tool"]

    sync_model, async_model = TestModel(script()), TestModel(script())
    sync_session = _session(tmp_path / "sync", sync_model, system="sys")
    async_session = _session(tmp_path / "async", async_model, system="sys")
    first = sync_session.llm("add", tools=[add], output_type=Answer)
    second = asyncio.run(async_session.allm("add", tools=[add], output_type=Answer))
    assert first == second == Answer(total=3)
    assert [r.messages for r in sync_model.requests] == [r.messages for r in async_model.requests]
    assert len(sync_model.requests) == 4
    assert _tools(sync_session) == _tools(async_session)
    assert _tools(sync_session)[1][3] is True  # the unknown tool answered as an error
    assert stored(sync_session) == stored(async_session)
    assert [r.tier for r in async_session.engine.records()] == ["reactive"]
