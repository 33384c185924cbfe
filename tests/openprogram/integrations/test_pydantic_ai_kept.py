"""The Pydantic AI capability converts a message once (issue 35, item 4): the messages a
request shares with the last one are checked all at once and their entries reused. Under
any sequence of histories (appends, pops, a window sliding on, the same message twice, a
message replaced by a copy, edits in place of a part, its arguments, the parts list or the
usage) the entries are exactly those of a whole conversion, and a history sent again
unchanged gets the very same entries."""

from __future__ import annotations

import copy
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)

from openprogram.integrations import Entry

# internal: KeptMessages, the capability's way to its entries, against the whole conversion
from openprogram.integrations._pydantic_kept import KeptMessages
from openprogram.integrations.pydantic_ai import to_entries

OPS = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["user", "answer", "call"]), st.integers(0, 3)),
        st.tuples(
            st.sampled_from(
                ["text", "args", "add part", "new parts", "usage", "copy", "twice", "again"]
            ),
            st.integers(0, 30),
        ),
        st.tuples(st.sampled_from(["pop", "slide"]), st.integers(1, 3)),
    ),
    max_size=30,
)


def _apply(history: list[ModelMessage], op: tuple[str, int]) -> list[ModelMessage]:
    kind, n = op
    if kind == "user":
        return [*history, ModelRequest(parts=[UserPromptPart(f"question {n}")])]
    if kind == "answer":
        return [*history, ModelResponse(parts=[TextPart(f"answer {n}")])]
    if kind == "call":
        return [*history, ModelResponse(parts=[ToolCallPart("f", {"n": n}, f"c{n}")])]
    if kind == "pop":
        return history[: max(0, len(history) - n)]
    if kind == "slide":
        return history[n:]
    if not history:
        return history
    message = history[n % len(history)]
    part = message.parts[0] if message.parts else None
    if kind == "text" and isinstance(part, UserPromptPart | TextPart):
        part.content = f"edited {n}"
    elif kind == "args" and isinstance(part, ToolCallPart) and isinstance(part.args, dict):
        args: dict[str, Any] = part.args  # type: ignore[assignment]
        args["n"] = n  # the dict itself, in place
    elif kind == "add part" and isinstance(message, ModelRequest):
        message.parts.append(UserPromptPart(f"added {n}"))  # type: ignore[attr-defined]
    elif kind == "new parts" and isinstance(message, ModelResponse):
        message.parts = [TextPart(f"rewritten {n}")]
    elif kind == "usage" and isinstance(message, ModelResponse):
        message.usage.input_tokens = n
    elif kind == "copy":
        return [copy.deepcopy(m) if m is message else m for m in history]
    elif kind == "twice":
        return [*history, message]
    return list(history)


def _same(kept: list[Entry], whole: list[Entry]) -> None:
    assert len(kept) == len(whole)
    for mine, theirs in zip(kept, whole, strict=True):
        assert mine.message == theirs.message
        assert mine.meta == theirs.meta
        assert mine.digest == theirs.digest
        if isinstance(theirs.original, tuple):
            assert mine.original[0] is theirs.original[0]
            assert mine.original[1] == theirs.original[1]
        else:
            assert mine.original is theirs.original


@settings(max_examples=300, deadline=None, database=None)
@given(OPS, st.lists(st.booleans(), max_size=30))
def test_kept_entries_equal_a_whole_conversion(
    ops: list[tuple[str, int]], other: list[bool]
) -> None:
    """Each op goes to one of two conversations (two histories) through the same object."""
    kept = KeptMessages(lambda message: to_entries([message]))
    histories: list[list[ModelMessage]] = [
        [ModelRequest(parts=[UserPromptPart(text)])] for text in ("hello", "hi")
    ]
    last: list[list[Entry]] = [[], []]
    steps: list[tuple[str, int]] = [("again", 0), *ops]
    whiches = [False, *other, *[False] * len(steps)][: len(steps)]
    for op, which in zip(steps, whiches, strict=True):
        history = histories[which] = _apply(histories[which], op)
        entries = kept.entries(history)
        _same(entries, to_entries(history))
        again = kept.entries(list(history))
        assert all(a is b for a, b in zip(again, entries, strict=True))
        if op[0] == "again" and history and last[which]:  # the other one's in between
            assert all(a is b for a, b in zip(entries, last[which], strict=False))
        last[which] = entries
