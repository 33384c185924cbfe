"""The library peers in the bench: pydantic-ai-harness and LangChain's context editing, run
through their own code, with messages converted both ways without loss."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from openprogram.bench import (
    HarnessReplay,
    LangChainClear,
    MessageCounter,
    from_langchain,
    from_pydantic_ai,
    load_trace,
    run_policy,
    to_langchain,
    to_pydantic_ai,
    tool_names,
    tool_pair_problems,
    trace_files,
)

Msg = dict[str, Any]
TRACES = Path(
    os.environ.get("OPENPROGRAM_TRACES") or Path(__file__).parents[2].parent / "shared" / "traces"
)


def call(call_id: str, name: str = "Read", arguments: str = '{"file_path": "a.py"}') -> Msg:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


ROUND_TRIP: list[Msg] = [
    {"role": "system", "content": "sys"},
    {"role": "developer", "content": "dev", "name": "ops"},
    {"role": "user", "content": "task"},
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            call("c1", "read", '{"path":  "src/app.py"}'),  # odd spacing must survive
            call("c2", "bash", "{not json"),
        ],
    },
    {"tool_call_id": "c1", "role": "tool", "content": "text"},  # key order must survive
    {"role": "tool", "tool_call_id": "c2", "content": None},
    {"role": "assistant", "content": "done", "thinking": "thought", "reasoning_content": "r"},
    {"role": "assistant", "content": "", "tool_calls": []},
    {"role": "assistant", "content": "x", "thinking": {"signature": "s"}},
]


@pytest.mark.parametrize("message", ROUND_TRIP, ids=lambda m: str(m["role"]))
def test_pydantic_ai_round_trip_keeps_values_and_key_order(message: Msg) -> None:
    [back] = from_pydantic_ai(to_pydantic_ai(message, tool_names(ROUND_TRIP)))
    assert back == message
    assert list(back) == list(message)


def test_pydantic_ai_parts_carry_the_text_the_harness_measures() -> None:
    response = to_pydantic_ai(ROUND_TRIP[4], input_tokens=120, output_tokens=7)
    kinds = [part.part_kind for part in response.parts]
    assert kinds == ["text", "tool-call", "tool-call"]
    assert response.parts[1].args == '{"path":  "src/app.py"}'
    assert (response.usage.input_tokens, response.usage.output_tokens) == (120, 7)
    tool = to_pydantic_ai(ROUND_TRIP[5], tool_names(ROUND_TRIP))
    assert (tool.parts[0].tool_name, tool.parts[0].content) == ("read", "text")


def test_an_edited_part_comes_back_with_its_new_text() -> None:
    from dataclasses import replace

    tool = to_pydantic_ai(ROUND_TRIP[5], tool_names(ROUND_TRIP))
    cleared = replace(tool, parts=[replace(tool.parts[0], content="[tool result cleared]")])
    assert from_pydantic_ai(cleared) == [
        {"tool_call_id": "c1", "role": "tool", "content": "[tool result cleared]"}
    ]
    response = to_pydantic_ai(ROUND_TRIP[4])
    clamped = replace(
        response, parts=[response.parts[0], replace(response.parts[1], args={"_clamped": "x"})]
    )
    calls = from_pydantic_ai(clamped)[0]["tool_calls"]
    assert calls[0]["function"]["arguments"] == '{"_clamped": "x"}'
    assert calls[0]["id"] == "c1" and calls[0]["type"] == "function"


def _shared_traces() -> list[Path]:
    if not TRACES.is_dir():
        pytest.skip(f"no shared traces at {TRACES} (set OPENPROGRAM_TRACES)")
    found = trace_files([TRACES])
    assert found
    return found


def test_every_shared_trace_round_trips_through_both_libraries() -> None:
    for path in _shared_traces():
        messages = load_trace(path).messages
        names = tool_names(messages)
        for index, message in enumerate(messages):
            [back] = from_pydantic_ai(to_pydantic_ai(message, names))
            assert back == message and list(back) == list(message), (path.name, index)
            assert from_langchain(to_langchain(message)) == message, (path.name, index)


# -- the harness, replayed statefully -----------------------------------------------------------


def tool_rounds(n: int, size: int = 400, *, same_file: bool = False) -> list[Msg]:
    msgs: list[Msg] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task: x"}]
    for i in range(n):
        path = "same.py" if same_file else f"f{i}.py"
        msgs.append(
            {
                "role": "assistant",
                "content": f"step {i}",
                "tool_calls": [call(f"c{i}", "Read", json.dumps({"file_path": path}))],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"line {i} " * size})
    return msgs


def replay(
    peer: HarnessReplay | LangChainClear, messages: list[Msg], count: MessageCounter
) -> list[list[Msg]]:
    prompts = []
    for position, message in enumerate(messages):
        if message["role"] != "assistant" or position == 0:
            continue
        prompt = peer.render(messages[:position])
        peer.answered(position, sum(count(m) for m in prompt), message)
        prompts.append(prompt)
    peer.close()
    return prompts


def test_harness_fits_the_budget_and_keeps_pairs() -> None:
    count = MessageCounter()
    messages = tool_rounds(30, size=100)
    prompts = replay(HarnessReplay(3_000, count, count.counter.count_text), messages, count)
    assert max(sum(count(m) for m in p) for p in prompts) <= 3_000
    assert sum(count(m) for m in messages) > 3 * 3_000
    assert all(not tool_pair_problems(p) for p in prompts)
    last = prompts[-1]
    assert last[0] == messages[0] and last[1] == messages[1]  # system and first task kept
    assert any(m.get("content") == "[tool result cleared]" for p in prompts for m in p)


def test_harness_edits_persist_into_its_history() -> None:
    count = MessageCounter()
    peer = HarnessReplay(3_000, count, count.counter.count_text)
    messages = tool_rounds(30)
    replay(peer, messages, count)
    held = [d for m in peer.ctx.messages for d in from_pydantic_ai(m)]
    assert len(held) < len(messages) - 1  # the sliding window dropped rounds for good
    assert held[0] == messages[0]


def test_harness_unedited_messages_are_the_traces_own_dicts() -> None:
    count = MessageCounter()
    messages = tool_rounds(3, size=5)
    prompt = HarnessReplay(30_000, count, count.counter.count_text).render(messages[:-1])
    assert all(a is b for a, b in zip(prompt, messages[:-1], strict=True))


def test_harness_deduplicates_reads_of_the_same_lines_only() -> None:
    count = MessageCounter()
    messages = tool_rounds(8, size=60, same_file=True)
    prompt = HarnessReplay(1_200, count, count.counter.count_text).render(messages)
    contents = [m["content"] for m in prompt if m["role"] == "tool"]
    assert "[superseded file read]" in contents
    assert contents[-1].startswith("line 7")


# -- LangChain's context editing ----------------------------------------------------------------


def test_langchain_clear_keeps_the_last_three_outputs_over_the_trigger() -> None:
    count = MessageCounter()
    messages = tool_rounds(10)
    prompt = LangChainClear(2_000, count).render(messages)
    tools = [m["content"] for m in prompt if m["role"] == "tool"]
    assert tools[:7] == ["[cleared]"] * 7
    assert tools[7:] == [m["content"] for m in messages[-5::2]]
    assert not tool_pair_problems(prompt)


def test_langchain_clear_under_the_trigger_hands_back_the_same_dicts() -> None:
    count = MessageCounter()
    messages = tool_rounds(2, size=5)
    prompt = LangChainClear(10_000, count).render(messages)
    assert all(a is b for a, b in zip(prompt, messages, strict=True))


def test_langchain_clear_then_trim_fits() -> None:
    count = MessageCounter()
    messages = tool_rounds(40)
    prompt = LangChainClear(1_500, count, trim=True).render(messages)
    assert sum(count(m) for m in prompt) <= 1_500
    assert not tool_pair_problems(prompt)


def test_peers_run_as_bench_policies(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in tool_rounds(20)))
    trace = load_trace(path)
    count = MessageCounter()
    for policy in ("harness", "langchain-clear", "langchain-clear-trim"):
        row = run_policy(trace, policy, 2_500, count)
        assert row is not None and row.turns == 20
        assert row.bad_pairs == 0
        if policy != "langchain-clear":
            assert row.over_budget == 0


# -- where the peer keeps what we lose -----------------------------------------------------------


def test_identifier_losses_name_the_cause(tmp_path: Path) -> None:
    from openprogram.bench import identifier_losses

    messages: list[Msg] = [{"role": "user", "content": "task: x"}]
    for i in range(12):
        names = "\n".join(f"helper_{i}_{k} = module_{i}.value_{k}" for k in range(800))
        messages.append(
            {
                "role": "assistant",
                "content": f"step {i}",
                "tool_calls": [call(f"c{i}", "Bash", "{}")],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": names})
        messages.append(
            {"role": "assistant", "content": f"now use helper_{i}_400 from module_{i}.value_400"}
        )
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in messages))
    trace = load_trace(path)
    count = MessageCounter()
    causes = identifier_losses(trace, "claude-code", "none", 8_000, count)
    assert causes and all(n > 0 for n in causes.values())
    assert any(cause.startswith("tool output") for cause in causes)
    assert identifier_losses(trace, "none", "none", 8_000, count) == {}


def test_bench_losses_prints_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from openprogram.cli import main

    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in tool_rounds(6, size=5)))
    assert main(["bench", str(path), "--losses", "harness", "--policies", "claude-code"]) == 0
    out = capsys.readouterr().out
    assert "claude-code" in out and "chat.jsonl" in out


def test_bench_losses_applies_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--losses`` ran the presets as they are, whatever ``--set`` said: an ablation of
    losses compared a setting with itself. A bad value now fails as in the bench."""
    from openprogram.cli import main

    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in tool_rounds(6, size=5)))
    argv = ["bench", str(path), "--losses", "harness", "--policies", "claude-code"]
    assert main([*argv, "--set", "low_water=5"]) == 1
    assert "low_water" in capsys.readouterr().err
    assert main([*argv, "--set", "low_water=0.5"]) == 0
