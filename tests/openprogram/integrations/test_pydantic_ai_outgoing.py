"""The Pydantic AI capability converts only what a request adds (issue 35, item 4): the
messages of the pairs it shares with the last request are that request's, and a message it
saw before is kept by a copy of its fields. Whatever the sequence of renders, each request
goes out exactly as a whole conversion would send it, and any change in place is noticed."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

pytest.importorskip("pydantic_ai")

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from graph import ChatMessage
from openprogram import Session
from openprogram.integrations import Paired

# internal: the capability's fast paths (_Outgoing: the conversion that reuses the last
# request's messages; snapshot: the copy a message is kept by) against the whole ones
from openprogram.integrations._kept import frozen
from openprogram.integrations._pydantic_kept import snapshot, state
from openprogram.integrations.pydantic_ai import (
    OpenProgramCapability,
    _Outgoing,
    from_messages,
    to_entries,
)


def _pool() -> list[Paired]:
    """Framework messages (requests of one to three parts, responses with text or calls)
    as their pairs, and rendered messages compaction made (no entry)."""
    history: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart("be brief"), UserPromptPart("hello")]),
        ModelResponse(parts=[ToolCallPart("look", {"q": 1}, "c1")]),
        ModelRequest(parts=[ToolReturnPart("look", "found", "c1"), UserPromptPart("and?")]),
        ModelResponse(parts=[TextPart("done")]),
        ModelRequest(parts=[UserPromptPart("more")]),
        ModelRequest(
            parts=[UserPromptPart("a"), ToolReturnPart("look", "x", "c2"), UserPromptPart("b")]
        ),
    ]
    pairs = [Paired(entry.message, entry) for entry in to_entries(history)]
    made: list[ChatMessage] = [
        {"role": "user", "content": "[summary]"},
        {"role": "system", "content": "a note"},
        {"role": "tool", "tool_call_id": "c1", "content": "[cleared]"},
        {"role": "tool", "tool_call_id": "c9", "content": "[cleared]"},
        {
            "role": "assistant",
            "content": "calling",
            "tool_calls": [
                {"id": "c9", "type": "function", "function": {"name": "seek", "arguments": "{}"}}
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "summed up"}]},
    ]
    return pairs + [Paired(message, None) for message in made]


POOL = _pool()
ORIGINALS = {
    id(p.entry.original[0] if isinstance(p.entry.original, tuple) else p.entry.original)
    for p in POOL
    if p.entry is not None
}
ITEMS = st.lists(st.sampled_from(POOL), max_size=12)
RENDERS = st.tuples(
    ITEMS, st.lists(st.tuples(st.integers(0, 14), ITEMS, st.booleans()), max_size=6)
)


def _shape(message: ModelMessage) -> tuple[Any, ...]:
    """What a message sends (its run ids included: Pydantic AI writes them on the last one)."""
    parts = [
        (
            type(p).__name__,
            str(getattr(p, "content", "")),
            getattr(p, "tool_call_id", None),
            getattr(p, "tool_name", None),
            str(getattr(p, "args", None)),
        )
        for p in message.parts
    ]
    return type(message).__name__, parts, message.run_id


@settings(max_examples=300, deadline=None, database=None)
@given(RENDERS)
def test_reused_messages_equal_a_whole_conversion(renders: Any) -> None:
    first, changes = renders
    outgoing = _Outgoing()
    paired = list(first)
    for cut, added, hooked in [(0, [], False), *changes]:
        paired = [*paired[: len(paired) - cut], *added]
        sent = outgoing.messages(list(paired))
        whole = from_messages(paired)
        assert len(sent) == len(whole)
        for fast, slow in zip(sent, whole, strict=True):
            if id(slow) in ORIGINALS:
                assert fast is slow
            else:
                assert id(fast) not in ORIGINALS
                assert _shape(fast) == _shape(slow)
        # as Pydantic AI does to what it sends last, or a hook to every message it is given
        written = [m for m in (sent if hooked else sent[-1:]) if id(m) not in ORIGINALS]
        for message in written:
            message.run_id = "written by the run"
            message.parts = [*message.parts, UserPromptPart("recorded")]
        sent.clear()  # the list is the request's own


def test_each_request_sends_the_history_as_the_framework_would(tmp_path: Path) -> None:
    """Through runs that continue one history, with a tool call in each: every request the
    model gets is the run's own messages (nothing compacted), in order."""
    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        if isinstance(messages[-1].parts[-1], UserPromptPart):
            return ModelResponse(parts=[ToolCallPart("double", {"n": len(messages)})])
        return ModelResponse(parts=[TextPart(f"answer {len(messages)}")])

    agent = Agent(
        FunctionModel(model), capabilities=[OpenProgramCapability(Session(tmp_path / "op.db"))]
    )

    @agent.tool_plain
    def double(n: int) -> int:
        return 2 * n

    history: list[ModelMessage] = []
    for question in ("one", "two", "three"):
        seen.clear()
        result = agent.run_sync(question, message_history=history)
        history = result.all_messages()
        assert len(seen) == 2
        for request in seen:
            assert [_shape(m)[:2] for m in request] == [
                _shape(m)[:2] for m in history[: len(request)]
            ]
        assert [m for m in seen[1] if isinstance(m, ModelResponse)] == [
            m for m in history[: len(seen[1])] if isinstance(m, ModelResponse)
        ]


VALUES = st.recursive(
    st.none() | st.text(max_size=3) | st.integers() | st.booleans(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=6,
)
EDITABLE = st.dictionaries(st.text(max_size=2), VALUES, min_size=1, max_size=3)


@settings(max_examples=200, deadline=None, database=None)
@given(EDITABLE, EDITABLE, st.text(max_size=3), st.integers(0, 2))
def test_a_message_snapshot_notices_any_change_in_place(
    args: dict[str, Any], details: dict[str, Any], text: str, where: int
) -> None:
    """The copy a message is kept by equals the message's state as a whole copy does, and
    a value changed in place anywhere in it (a part's, a nested one, the usage's) makes it
    differ."""
    response = ModelResponse(
        parts=[TextPart(text), ToolCallPart("f", args, "c1")], provider_details=details
    )
    returned = dict(details)
    request = ModelRequest(parts=[ToolReturnPart("f", returned, "c1"), UserPromptPart(text)])
    for message in (response, request):
        kept = snapshot(message)
        assert kept == state(message)
        assert kept == [frozen(fields) for fields in state(message)]
    edits = [
        lambda: args.update({"edited": [1]}),
        lambda: details.update({"edited": {"x": None}}),
        lambda: setattr(response.usage, "input_tokens", 7),
    ]
    before = snapshot(response)
    edits[where]()
    assert before != state(response)
    before = snapshot(request)
    returned["edited"] = True
    assert before != state(request)


def test_tool_arguments_changed_in_place_are_stored_again(tmp_path: Path) -> None:
    """A call's arguments, a dict edited in place in the history a run continues, reach the
    graph."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if isinstance(messages[-1].parts[-1], UserPromptPart):
            return ModelResponse(parts=[ToolCallPart("double", {"n": 1}, "c1")])
        return ModelResponse(parts=[TextPart("done")])

    session = Session(tmp_path / "op.db")
    agent = Agent(FunctionModel(model), capabilities=[OpenProgramCapability(session)])

    @agent.tool_plain
    def double(n: int) -> int:
        return 2 * n

    history = agent.run_sync("go").all_messages()
    call = history[1].parts[0]
    assert isinstance(call, ToolCallPart) and isinstance(call.args, dict)
    cast("dict[str, Any]", call.args)["n"] = 5  # the very dict stored before
    agent.run_sync("again", message_history=history)
    calls = [
        c["function"]["arguments"]
        for m in session.engine.preview().messages
        for c in m.get("tool_calls") or ()
    ]
    assert calls[0] == '{"n":5}'
