"""The Pydantic AI capability converts only what a request adds (issue 35, item 4): the
messages of the pairs it shares with the last request are that request's. Whatever the
sequence of renders, each request goes out exactly as a whole conversion would send it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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

# internal: _Outgoing, the conversion that reuses the last request's messages, against the whole one
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
RENDERS = st.tuples(ITEMS, st.lists(st.tuples(st.integers(0, 14), ITEMS), max_size=6))


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
    for cut, added in [(0, []), *changes]:
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
        if sent and id(sent[-1]) not in ORIGINALS:  # as Pydantic AI does to what it sends last
            sent[-1].run_id = "written by the run"
            sent[-1].parts = [*sent[-1].parts, UserPromptPart("recorded")]
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
