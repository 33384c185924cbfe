"""The two bench baselines: observation masking and LangChain trim_messages."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from openprogram.bench import (
    BenchError,
    from_langchain,
    observation_masking,
    to_langchain,
    tool_pair_problems,
    trim_baseline,
)

Msg = dict[str, Any]


def count(m: Msg) -> int:
    return len(str(m.get("content") or ""))


def call(call_id: str, name: str = "read", arguments: str = "{}") -> Msg:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool_rounds(n: int) -> list[Msg]:
    msgs: list[Msg] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    for i in range(n):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [call(f"c{i}")]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"output {i:02d}"})
    return msgs


# -- observation masking -----------------------------------------------------------------------


def test_masking_keeps_exactly_the_last_ten() -> None:
    msgs = tool_rounds(12)
    before = copy.deepcopy(msgs)
    out = observation_masking(msgs)
    assert msgs == before  # input untouched
    tools = [m for m in out if m["role"] == "tool"]
    assert [m["content"] for m in tools[:2]] == ["[output masked: 9 chars]"] * 2
    assert [m["content"] for m in tools[2:]] == [f"output {i:02d}" for i in range(2, 12)]
    # masked messages are new dicts that keep their pairing; the rest are the same objects
    assert tools[0] is not msgs[3] and tools[0]["tool_call_id"] == "c0"
    assert all(a is b for a, b in zip(out, msgs, strict=True) if a["role"] != "tool" or a is b)
    assert sum(a is not b for a, b in zip(out, msgs, strict=True)) == 2
    assert tool_pair_problems(out) == []


def test_masking_without_tool_messages_or_with_few() -> None:
    plain = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert observation_masking(plain) == plain
    few = tool_rounds(10)
    assert observation_masking(few) == few


def test_masking_keep_zero_and_list_content() -> None:
    msgs = tool_rounds(1)
    msgs[-1] = {"role": "tool", "tool_call_id": "c0", "content": [{"type": "text", "text": "abc"}]}
    assert observation_masking(msgs, keep=0)[-1]["content"] == "[output masked: 3 chars]"
    with pytest.raises(BenchError):
        observation_masking(msgs, keep=-1)


# -- conversion --------------------------------------------------------------------------------


ROUND_TRIP: list[Msg] = [
    {"role": "system", "content": "be brief"},
    {"role": "developer", "content": "dev rules"},
    {
        "role": "user",
        "name": "ann",
        "content": [
            {"type": "text", "text": "see"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            call("c1", "read", '{"path":  "src/app.py"}'),  # odd spacing must survive
            call("c2", "bash", "{not json"),
            call("c3", "noop", "[1, 2]"),  # JSON but not an object
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "text"},
    {"role": "tool", "tool_call_id": "c2", "content": None},
    {"role": "tool", "tool_call_id": "c3", "name": "noop", "content": "[]"},
    {"role": "assistant", "content": "done", "reasoning_content": "thought"},
    {"role": "assistant", "content": "", "tool_calls": []},
]


@pytest.mark.parametrize("message", ROUND_TRIP, ids=lambda m: str(m["role"]))
def test_langchain_round_trip(message: Msg) -> None:
    assert from_langchain(to_langchain(message)) == message


def test_langchain_tool_calls_are_parsed() -> None:
    lc = to_langchain(ROUND_TRIP[3])
    assert lc.tool_calls == [
        {"name": "read", "args": {"path": "src/app.py"}, "id": "c1", "type": "tool_call"}
    ]
    assert [c["id"] for c in lc.invalid_tool_calls] == ["c2", "c3"]


# -- trim_messages -----------------------------------------------------------------------------


def ten_each() -> list[Msg]:
    # S = 5 tokens, every other message 10
    return [
        {"role": "system", "content": "s" * 5},
        {"role": "user", "content": "u1" * 5},
        {"role": "assistant", "content": "a1" * 5},
        {"role": "user", "content": "u2" * 5},
        {"role": "assistant", "content": "a2" * 5},
    ]


def test_trim_by_hand() -> None:
    msgs = ten_each()
    # budget 30: S=5 leaves 25; from the end A2 (10) + U2 (10) = 20 fit, A1 would make 30
    out = trim_baseline(msgs, 30, count)
    assert out == [msgs[0], msgs[3], msgs[4]]
    assert all(a is b for a, b in zip(out, [msgs[0], msgs[3], msgs[4]], strict=True))
    # budget 24 leaves 19: only A2 fits, and it is dropped to start on a human message
    assert trim_baseline(msgs, 24, count) == [msgs[0]]
    assert trim_baseline(msgs, 1000, count) == msgs


def test_trim_starts_with_system_then_human_and_fits() -> None:
    msgs = tool_rounds(0)
    for i in range(30):
        if i % 3 == 2:  # a user turn after every third round
            msgs.append({"role": "user", "content": f"user turn {i}"})
        msgs.extend(tool_rounds(i + 1)[-2:])
    assert tool_pair_problems(msgs) == []
    budget = 200
    out = trim_baseline(msgs, budget, count)
    assert out[0] == msgs[0] and out[0]["role"] == "system"
    assert out[1]["role"] == "user"
    assert sum(count(m) for m in out) <= budget
    assert len(out) < len(msgs)
    assert out[1:] == msgs[len(msgs) - len(out) + 1 :]  # a suffix of the history
    assert tool_pair_problems(out) == []


def test_trim_counts_openai_dicts() -> None:
    seen: list[Msg] = []

    def spy(m: Msg) -> int:
        seen.append(m)
        return count(m)

    msgs = ten_each()
    trim_baseline(msgs, 30, spy)
    # one count per message (memoised over the binary search), on dicts equal to the originals
    assert sorted(seen, key=str) == sorted(msgs, key=str)
