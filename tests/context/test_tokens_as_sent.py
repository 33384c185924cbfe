"""Counting as sent: a counter whose ``as_sent`` is on never counts a message list or a tool
list under the cl100k tokens of its JSON as an OpenAI-compatible client writes it, and an
engine set to count as sent keeps those counts apart from its plain ones."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from context import ContextEngine, TokenCache, TokenCounter
from graph import ConversationGraph

WIRE = TokenCounter(encoding="cl100k_base")
TRICKY = st.sampled_from(['"', "\\", "\n", "\t", "\r", "\u00e9", "\u4e2d", "\x01", " ", "{", "}"])
TEXT = st.lists(st.one_of(TRICKY, st.text(max_size=12)), max_size=30).map("".join)


def wire(value: Any) -> int:
    return WIRE.count_text(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def sent_counter() -> TokenCounter:
    counter = TokenCounter(encoding="cl100k_base")
    counter.as_sent = True
    return counter


@st.composite
def messages(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in range(draw(st.integers(1, 6))):
        role = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
        if role == "tool":
            out.append({"role": "tool", "tool_call_id": f"call_{n}x", "content": draw(TEXT)})
        elif role == "assistant" and draw(st.booleans()):
            arguments = json.dumps({"path": draw(TEXT)}, ensure_ascii=False)
            call = {"id": f"call_{n}x", "type": "function"}
            call["function"] = {"name": "read_file", "arguments": arguments}  # type: ignore[assignment]
            out.append(
                {"role": "assistant", "content": draw(st.none() | TEXT), "tool_calls": [call]}
            )
        elif role == "user" and draw(st.booleans()):
            parts = [{"type": "text", "text": draw(TEXT)} for _ in range(draw(st.integers(1, 3)))]
            out.append({"role": "user", "content": parts})
        else:
            out.append({"role": role, "content": draw(TEXT)})
    return out


@settings(max_examples=2000, deadline=None)
@given(messages())
def test_messages_counted_as_sent_are_never_under_their_json(chat: list[dict[str, Any]]) -> None:
    assert sent_counter().count_messages(chat) >= wire(chat)


@settings(max_examples=100, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=4), st.booleans())
def test_tool_schemas_counted_as_sent_are_never_under_their_json(
    descriptions: list[str], strict: bool
) -> None:
    tools = []
    for n, text in enumerate(descriptions):
        parameters = {
            "type": "object",
            "properties": {"key": {"type": "string", "description": text}},
            "required": ["key"],
            "additionalProperties": False,
        }
        function: dict[str, Any] = {"name": f"tool_{n}", "description": text}
        function["parameters"] = parameters
        if strict:
            function["strict"] = True
        tools.append({"type": "function", "function": function})
    assert sent_counter().count_tools(tools) >= wire(tools)


def test_a_quoted_output_counts_its_escapes() -> None:
    output = 'def f():\n    return {"a": "b\\tc"}\n' * 40
    message = {"role": "tool", "tool_call_id": "call_1", "content": output}
    plain, sent = TokenCounter(encoding="cl100k_base"), sent_counter()
    assert sent.count_message(message) >= wire([message]) > plain.count_message(message)


def test_an_engine_counting_as_sent_keeps_its_counts_apart(tmp_path: Any) -> None:
    graph = ConversationGraph.open(tmp_path / "op.db")
    graph.append({"role": "user", "content": 'say "hi"\n' * 50})
    engine = ContextEngine(graph, budget=50_000)
    plain = engine.render().tokens
    engine.count_as_sent()
    sent = engine.render().tokens
    assert sent >= wire(engine.render().messages) > plain
    assert any(key.endswith("~sent") for key, _ in engine.cache.items())
    reopened = ConversationGraph.open(tmp_path / "op.db", graph.session)
    fresh = ContextEngine(reopened, budget=50_000)
    assert fresh.render().tokens == plain  # the stored counts as sent are not read as plain


def test_a_tagged_cache_reads_and_writes_its_own_keys() -> None:
    cache = TokenCache()
    cache.put("n1:full", 10)
    cache.tag = "sent"
    assert cache.get("n1:full") is None and "n1:full" not in cache
    cache.put("n1:full", 14)
    assert cache.get("n1:full") == 14 and cache.dirty() == {"n1:full": 10, "n1:full~sent": 14}


@settings(max_examples=200, deadline=None)
@given(TEXT.filter(lambda text: len(text) > 20))
def test_a_text_past_the_exact_limit_is_bounded_without_escaping(text: str) -> None:
    counter = TokenCounter(encoding="cl100k_base", exact_limit=20)
    counter.as_sent = True
    message = {"role": "tool", "tool_call_id": "call_1", "content": text}
    assert counter.count_message(message) >= wire([message])
