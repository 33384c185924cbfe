"""The Agents SDK session through ``Runner`` runs on a scripted ``Model``: parallel calls
as one assistant message, instructions inside the budget, the three pieces wired by one
object, and a malformed item named (two calls of one id in a response the SDK refuses
itself: ``ModelBehaviorError``)."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _adapter_helpers import lookup
from hypothesis import example, given, settings
from hypothesis import strategies as st

pytest.importorskip("agents")

from _agents_fakes import say
from agents import (
    Agent,
    FunctionTool,
    Model,
    ModelResponse,
    RunHooks,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.models.chatcmpl_converter import Converter
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
)

from openprogram import Session
from openprogram.integrations import MalformedMessage
from openprogram.integrations.openai_agents import OpenProgramSession

LONG = "Follow the house rules. " + " ".join(
    f"Rule {i}: keep key k_{i} in mind." for i in range(300)
)
Script = Callable[[int, list[Any]], list[Any]]


@pytest.fixture(autouse=True)
def _no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)
    yield


def call(call_id: str, name: str = "lookup", **args: Any) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", call_id=call_id, name=name, arguments=json.dumps(args)
    )


class Scripted(Model):
    """A model answering from a script, recording each request (instructions, input, tools)."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[tuple[str | None, list[Any], list[Any]]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.requests.append((system_instructions, items, list(tools)))
        output = self.script(len(self.requests), items)
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def _tokens(session: Session, request: tuple[str | None, list[Any], list[Any]]) -> int:
    """Tokens of what the model received: instructions, input items and tool schemas."""
    instructions, items, tools = request
    messages: list[Any] = list(Converter.items_to_messages(items))
    if instructions:
        messages.insert(0, {"role": "system", "content": instructions})
    schemas = [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.params_json_schema,
            },
        }
        for t in tools
        if isinstance(t, FunctionTool)
    ]
    counter = session.engine.counter
    return int(counter.count_messages(messages) + counter.count_tools(schemas))


def test_parallel_calls_are_one_assistant_message(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=50_000)
    memory = OpenProgramSession(session)

    def script(turn: int, items: list[Any]) -> list[Any]:
        if turn == 1:
            return [call(f"c{i}", key=f"k_{i}") for i in (1, 2, 3)]
        return [say("done")]

    model = Scripted(script)
    agent = Agent("a", model=model, tools=[function_tool(lookup)])
    assert asyncio.run(memory.run(agent, "Look up k_1, k_2 and k_3.")).final_output == "done"
    assistants = [n for n in session.graph.nodes() if n.role == "assistant"]
    assert len(assistants) == 2  # the three calls' turn, and the answer
    assert [t.payload.call_id for t in session.graph.tools(assistants[0].id)] == ["c1", "c2", "c3"]  # type: ignore[union-attr]
    sent = Converter.items_to_messages(model.requests[-1][1])
    assert [len(m.get("tool_calls") or ()) for m in sent if m["role"] == "assistant"] == [3]
    last = memory.mirror.last
    assert last is not None
    rendered = [m for m in last.messages if m["role"] == "assistant"]
    assert [len(m.get("tool_calls") or ()) for m in rendered] == [3]


def test_instructions_are_stored_and_counted_in_the_budget(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=6_000, state_dir=tmp_path / "state")
    memory = OpenProgramSession(session)

    def script(turn: int, items: list[Any]) -> list[Any]:
        return [call(f"c{turn}", key=f"k_{turn}")] if turn <= 20 else [say("done")]

    model = Scripted(script)
    agent = Agent("a", instructions=LONG, model=model, tools=[function_tool(lookup)])
    asyncio.run(memory.run(agent, "Look up k_1 to k_20.", max_turns=30))
    largest = max(_tokens(session, request) for request in model.requests)
    assert largest <= 6_000
    assert all(request[0] == LONG for request in model.requests)
    systems = [n for n in session.graph.nodes() if n.role == "system"]
    assert len(systems) == 1 and systems[0].payload.content == LONG  # type: ignore[union-attr]


def test_run_wires_the_filter_and_the_tools(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=50_000)
    memory = OpenProgramSession(session)

    def script(turn: int, items: list[Any]) -> list[Any]:
        if turn == 1:  # a history tool the agent was not given
            return [call("r1", "search_history", query="k_1")]
        return [say("read it")]

    model = Scripted(script)
    agent = Agent("a", model=model)
    assert asyncio.run(memory.run(agent, "What did we find?")).final_output == "read it"
    assert "search_history" in {t.name for t in model.requests[0][2]}
    assert agent.tools == []  # the caller's agent is left as it was
    assert memory.mirror.last is not None  # the filter rendered the calls


def test_reported_input_tokens_anchor_the_estimates_and_hooks_pass_on(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=50_000)
    memory = OpenProgramSession(session)
    ended: list[int] = []

    class Counting(RunHooks[Any]):
        async def on_llm_end(self, context: Any, agent: Any, response: ModelResponse) -> None:
            ended.append(response.usage.input_tokens)

    class Reporting(Scripted):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            response = await super().get_response(*args, **kwargs)
            response.usage = Usage(requests=1, input_tokens=5_000, output_tokens=1)
            return response

    agent = Agent("a", model=Reporting(lambda turn, items: [say("ok")]))
    asyncio.run(memory.run(agent, "hi", hooks=Counting()))
    assert ended == [5_000]  # the run's own hooks still called
    assert session.engine.anchor.reports == 1 and session.engine.anchor.ratio > 1.0


def test_a_run_without_the_filter_warns(tmp_path: Path) -> None:
    memory = OpenProgramSession(Session(tmp_path / "op.db", budget=50_000))
    agent = Agent("a", model=Scripted(lambda turn, items: [say("hi")]))
    with pytest.warns(UserWarning, match="input_filter"), warnings.catch_warnings():
        # pytest.warns re-emits what it did not match from this file, where the ignore of
        # asyncio's own leaked-loop ResourceWarning (pyproject) no longer applies
        warnings.filterwarnings("ignore", "unclosed event loop", ResourceWarning)
        asyncio.run(Runner.run(agent, "hello", session=memory))


def test_a_function_call_without_a_call_id_is_named(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=50_000)
    memory = OpenProgramSession(session)
    agent = Agent("a", model=Scripted(lambda turn, items: [say("hi")]))
    broken: list[Any] = [
        {"role": "user", "content": "go"},
        {"type": "function_call", "name": "lookup", "arguments": "{}"},
    ]
    with pytest.raises(
        MalformedMessage, match=r"openai_agents item 1 \(function_call\): no call_id"
    ):
        asyncio.run(memory.run(agent, broken))
    assert len(session.graph) == 0


def test_each_call_goes_out_with_the_sdks_own_items(tmp_path: Path) -> None:
    """Under a budget nothing needs, every call's input is the SDK's own items, the very
    objects, over runs whose calls continue the stored list (its entries reused, shown as
    the call's items), the last after a reasoning item stored by hand; and the last render
    holds what converting the call's items from scratch gives."""
    from agents import RunConfig

    from openprogram.integrations.openai_agents import to_entries

    session = Session(tmp_path / "op.db", budget=100_000)
    memory = OpenProgramSession(session)
    seen: list[tuple[list[Any], list[Any]]] = []

    async def checked(data: Any) -> Any:
        out = await memory.input_filter(data)
        seen.append((list(data.model_data.input), list(out.input)))
        return out

    def script(turn: int, items: list[Any]) -> list[Any]:
        return [call(f"c{turn}", key=f"k_{turn}")] if turn % 3 == 1 else [say(f"done {turn}")]

    agent = memory.agent(Agent("helper", model=Scripted(script), tools=[function_tool(lookup)]))
    config = RunConfig(call_model_input_filter=checked)
    for question in ("Look up k_1.", "And k_4?", "Again."):
        run = Runner.run(agent, question, session=memory, run_config=config)
        asyncio.run(run)
    asyncio.run(memory.add_items([{"type": "reasoning", "id": "rs", "summary": []}]))
    asyncio.run(Runner.run(agent, "Last.", session=memory, run_config=config))
    assert len(seen) == 6
    for asked, sent in seen:
        assert len(sent) == len(asked) and all(a is b for a, b in zip(sent, asked, strict=True))
    last = memory.mirror.last
    assert last is not None
    stored = [e.message for e in to_entries(seen[-1][0])]
    assert [m for m in last.messages if m["role"] != "system"] == stored


TEXTS = st.one_of(st.text(max_size=5), st.sampled_from(["", "hi", "a\nb"]))
PARTS = st.lists(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["input_text", "output_text", "text"])}, optional={"text": TEXTS}
    ),
    max_size=2,
)
ANY = st.one_of(TEXTS, st.none(), st.integers(0, 3), PARTS)
ROLES = st.sampled_from(["user", "assistant", "system", "developer", "tool", "other"])
ITEM = st.one_of(
    st.fixed_dictionaries(
        {"role": ROLES, "content": st.one_of(TEXTS, PARTS, st.none())},
        optional={
            "type": st.sampled_from(["message", "function_call_output", "reasoning"]),
            "phase": st.sampled_from([None, "commentary", "final_answer", "other"]),
            "id": st.sampled_from(["m1", "m2"]),
            "status": st.sampled_from(["completed"]),
        },
    ),
    st.dictionaries(st.sampled_from(["role", "content", "type", "phase", "id"]), ANY),
)


@settings(max_examples=300, deadline=None, database=None)
@given(ITEM)
@example({"role": "developer", "content": "rules"})
@example({"role": "assistant", "content": "", "type": "message", "phase": "final_answer"})
@example({"role": "user", "content": "x", "phase": "other"})
@example({"role": "tool", "content": "x"})
def test_a_text_item_converts_as_the_sdks_converter_makes_it(item: dict[str, Any]) -> None:
    """The text items converted without the SDK's converter (the first request converts a
    whole stored list) give exactly the entry the converter's path gives, any other item
    goes through the converter."""
    # internal: _group is the converter's path, the one a text item must equal
    from openprogram.integrations._agents_convert import _group
    from openprogram.integrations.openai_agents import to_entries

    try:
        entries = to_entries([item], start=3)
    except MalformedMessage:
        return
    expected = _group([item], 3)
    assert [(e.message, e.original, e.meta, e.label) for e in entries] == [
        (e.message, e.original, e.meta, e.label) for e in expected
    ]


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), max_size=30), st.integers(0, 3))
def test_a_call_goes_out_with_its_own_items_around_what_compaction_made(
    kept: list[tuple[bool, bool]], calls: int
) -> None:
    """Whatever a render keeps of the stored list's entries (in order, with summaries and
    notes between), the call's input holds, for each kept entry, the call's own items at
    its place, the very objects, and a new item for each message compaction made."""
    # internal: the places a session keeps for its entries, its sending of a call, Paired
    from openprogram.integrations import _agents_convert as agents_convert
    from openprogram.integrations import openai_agents
    from openprogram.integrations._entry import Paired

    history: list[Any] = []
    for n in range(len(kept)):
        history.append({"role": "user", "content": f"q{n}"})
        if n < calls:  # two calls in parallel: one entry of two items
            for c in (f"c{n}", f"d{n}"):
                history.append(
                    {"type": "function_call", "call_id": c, "name": "f", "arguments": "{}"}
                )
            for c in (f"c{n}", f"d{n}"):
                history.append({"type": "function_call_output", "call_id": c, "output": "v"})
        history.append({"role": "assistant", "content": f"a{n}"})
    entries = openai_agents.to_entries(history)
    starts = agents_convert.entry_starts(entries, None, {})
    items = json.loads(json.dumps(history))  # the call's own copies, equal to the stored
    paired, expected = [], []
    for (keep, note), entry in zip(kept * 4, entries, strict=False):
        if note:
            made = Paired({"role": "user", "content": "a summary"}, None)
            paired.append(made)
            expected += openai_agents.from_messages([made])
        if keep:
            paired.append(Paired(entry.message, entry))
            start = starts[id(entry)]
            expected += items[start : start + len(entry.original)]
    sent = agents_convert.sent_items(paired, items, starts, [])
    assert sent == expected
    mine = {id(i) for i in items}
    assert all(a is b for a, b in zip(sent, expected, strict=True) if id(b) in mine)
