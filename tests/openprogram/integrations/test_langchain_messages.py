"""The LangChain adapter's shortcuts give what the full path gives: a plain message converted
from its fields as LangChain's ``convert_to_openai_messages`` converts it, and a call's
messages reused from the last call's for the part of the paired list that did not change.

# internal: the shortcuts against the full path they stand for, which no public entry point
# tells apart (that is their point); the agent-level test is in test_langchain_requests.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("langchain")

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from openprogram.integrations import Entry, Paired
from openprogram.integrations._langchain_messages import (  # internal: see the docstring
    Outgoing,
    chat_message,
    converted,
    entries_of,
    from_messages,
    plain,
    snapshot,
    text,
)

words = st.text(st.sampled_from('ab c\n\u00e9\u4e2d"\\{}'), max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | words,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(words, inner, max_size=3),
    max_leaves=6,
)
extras = st.fixed_dictionaries(
    {},
    optional={
        "refusal": words,
        "__openai_role__": st.sampled_from(["developer", "system"]),
        "other": json_values,
    },
)
calls = st.lists(
    st.fixed_dictionaries(
        {
            "name": words,
            "args": st.dictionaries(words, json_values, max_size=3),
            "id": st.none() | words,
        }
    ),
    max_size=3,
)
blocks = st.lists(
    words | st.fixed_dictionaries({"type": st.just("text"), "text": words}), max_size=3
)
shared: dict[str, Any] = {"name": st.none() | words, "id": st.none() | words}


def _messages(content: st.SearchStrategy[Any]) -> st.SearchStrategy[BaseMessage]:
    fields = {"content": content, "additional_kwargs": extras, **shared}
    return st.one_of(
        st.builds(HumanMessage, **fields),
        st.builds(SystemMessage, **fields),
        st.builds(AIMessage, tool_calls=calls, **fields),
        st.builds(
            ToolMessage,
            tool_call_id=words,
            status=st.sampled_from(["success", "error"]),
            **fields,
        ),
    )


plain_messages = _messages(words)
other_messages = st.one_of(
    _messages(blocks),
    st.builds(AIMessageChunk, content=words | blocks, tool_calls=calls, **shared),
    st.builds(ChatMessage, content=words, role=st.sampled_from(["user", "critic"]), **shared),
    st.builds(FunctionMessage, content=words, name=words),
)


@settings(max_examples=300, deadline=None)
@given(plain_messages)
def test_a_plain_message_converts_as_langchain_converts_it(message: BaseMessage) -> None:
    expected = converted(message)
    shortcut = plain(message)
    if "__openai_role__" in message.additional_kwargs:
        assert shortcut is None
        return
    assert shortcut is not None
    assert list(shortcut.items()) == list(expected.items())  # the same keys in the same order


@settings(max_examples=200, deadline=None)
@given(plain_messages | other_messages)
def test_any_message_converts_as_langchain_converts_it(message: BaseMessage) -> None:
    assert list(chat_message(message).items()) == list(converted(message).items())


@settings(max_examples=200, deadline=None)
@given(plain_messages | other_messages, st.data())
def test_a_snapshot_tells_a_message_changed_in_place(message: BaseMessage, data: Any) -> None:
    taken = snapshot(message)
    assert taken == vars(message)  # compared with the message's own dict, KeptEntries' state
    containers = [key for key, value in vars(message).items() if isinstance(value, (dict, list))]
    key = data.draw(st.sampled_from([*containers, "content"]))
    value = vars(message)[key]
    if isinstance(value, dict):
        value["changed"] = True  # an empty container at first sight, too
    elif isinstance(value, list):
        value.append("changed")
    else:
        message.content = f"{value}, changed"
    assert taken != vars(message)


def test_a_resent_history_keeps_its_entries() -> None:
    """The middleware's kept entries with LangChain's snapshot: an unchanged history resent
    gets the very entries back (the snapshot compares equal to the state it is checked
    against), and a message edited in place gets new ones."""
    from openprogram.integrations._kept import KeptEntries  # internal: see the docstring

    kept = KeptEntries(entries_of, snapshot=snapshot)
    history: list[BaseMessage] = [HumanMessage("q", id="h"), AIMessage("a", id="a")]
    first = kept.entries(history)
    again = kept.entries([*history, HumanMessage("next", id="n")])
    assert all(map(lambda a, b: a is b, first, again[:2]))
    history[1].content = "edited"
    edited = kept.entries(history)
    assert edited[0] is first[0] and edited[1] is not first[1]
    assert edited[1].message["content"] == "edited"


# -- a call's messages: the last call's reused for what did not change ----------------------
def _pool() -> list[Entry]:
    """Entries of a history with calls and results (their ids repeat one call's, too)."""
    messages: list[BaseMessage] = [HumanMessage("question", id="h")]
    for n in range(4):
        call = {"name": f"tool{n}", "args": {"n": n}, "id": f"c{n % 3}"}
        messages += [
            AIMessage("", tool_calls=[call], id=f"a{n}"),
            ToolMessage(f"result {n}", tool_call_id=f"c{n % 3}", id=f"t{n}"),
        ]
    messages.append(AIMessage("answer", id="z"))
    return [entry for message in messages for entry in entries_of(message)]


POOL = _pool()
MADE: list[dict[str, Any]] = [
    {"role": "system", "content": "the rules"},
    {"role": "system", "content": [{"type": "text", "text": "more rules"}]},
    {"role": "user", "content": "a summary of what came before"},
    {"role": "tool", "tool_call_id": "c1", "content": "[cleared]"},
    {"role": "tool", "tool_call_id": "c9", "content": "[cleared]"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"type": "function", "id": "c1", "function": {"name": "other", "arguments": "{}"}}
        ],
    },
]
"""Messages compaction makes (no entry): instructions, a summary, cleared results, a call."""
KEPT = {n: Paired(entry.message, entry) for n, entry in enumerate(POOL)} | {
    -1 - n: Paired(message, None) for n, message in enumerate(MADE)
}
"""One pair of each, handed back again where a spec asks for the same object."""
specs = st.tuples(st.integers(-len(MADE), len(POOL) - 1), st.booleans())
"""An entry of the pool (>= 0) or a made message (< 0), and whether its pair is kept."""


def _pair(spec: tuple[int, bool]) -> Paired:
    index, same = spec
    if same:
        return KEPT[index]
    if index >= 0:
        return Paired(POOL[index].message, POOL[index])
    return Paired(MADE[-1 - index], None)


def _expected(paired: list[Paired]) -> tuple[str, list[BaseMessage]]:
    def instruction(p: Paired) -> bool:
        return p.entry is None and p.message.get("role") == "system"

    joined = "\n\n".join(text(p.message.get("content")) for p in paired if instruction(p))
    return joined, from_messages([p for p in paired if not instruction(p)])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.lists(specs, max_size=8)), max_size=6))
def test_a_call_sends_what_the_full_conversion_sends(
    calls: list[tuple[int, list[tuple[int, bool]]]],
) -> None:
    outgoing = Outgoing()
    paired: list[Paired] = []
    for keep, added in calls:
        paired = paired[:keep] + [_pair(spec) for spec in added]
        instructions, messages = outgoing.messages(paired)
        expected_instructions, expected = _expected(paired)
        assert instructions == expected_instructions
        assert len(messages) == len(expected)
        for got, want in zip(messages, expected, strict=True):
            originals = [entry.original for entry in POOL]
            if any(want is original for original in originals):
                assert got is want  # the state's own object
            else:
                assert got == want and not any(got is original for original in originals)
