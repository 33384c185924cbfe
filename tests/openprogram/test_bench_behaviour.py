"""``bench --behaviour``: the next action a model takes from the full history and from the
compacted prompt, compared on sampled over-budget turns (with a fake model that acts on
the task only when the prompt still holds it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openprogram.testing import FunctionModel, ModelRequest, ModelResponse, Usage, override

TASK = "Fix the crash in parse_header (ticket HDR-4471)."


def _trace(tmp_path: Path, rounds: int = 30) -> Path:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": TASK},
    ]
    for i in range(rounds):
        path = f"src/app/module_{i}.py"
        call = {"name": "read", "arguments": json.dumps({"path": path})}
        messages.append(
            {
                "role": "assistant",
                "content": f"Reading {path}.",
                "tool_calls": [{"id": f"c{i}", "type": "function", "function": call}],
            }
        )
        body = "".join(f"{path}:{n} def handler_{n}(): pass\n" for n in range(120))
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": body})
    messages.append({"role": "assistant", "content": "Found it: parse_header reads past the end."})
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(messages))
    return trace


def _agent(request: ModelRequest) -> ModelResponse:
    """Reads the ticket's file while the prompt names the ticket; answers otherwise."""
    text = request.messages[-1]["content"]
    if "HDR-4471" in text:
        reply = {"tool": "read", "arguments": {"path": "src/app/header.py"}, "answer": None}
    else:
        reply = {"tool": None, "arguments": {}, "answer": "What should I do?"}
    message = {"role": "assistant", "content": f"```json\n{json.dumps(reply)}\n```"}
    return ModelResponse(message, usage=Usage(input_tokens=len(text) // 4, output_tokens=20))


def _behaviour(
    tmp_path: Path, judge: FunctionModel, policy: str, samples: int, capsys: Any
) -> dict[str, Any]:
    """The ``--behaviour`` row ``openprogram bench --json`` writes for one policy."""
    from openprogram.cli import main

    argv = ["bench", str(_trace(tmp_path)), "--budget", "3000", "--policies", policy, "--json"]
    with override(model=judge):
        assert main([*argv, "--behaviour", "fake-judge", "--behaviour-turns", str(samples)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    (row,) = [line["behaviour"] for line in lines if "behaviour" in line]
    assert row["policy"] == policy
    return dict(row)


def test_a_policy_that_keeps_the_task_agrees_with_the_full_history(
    tmp_path: Path, capsys: Any
) -> None:
    model = FunctionModel(_agent, name="fake-judge")
    row = _behaviour(tmp_path, model, "claude-code", 4, capsys)
    assert row["sampled"] == 4 and row["failed"] == 0
    assert row["calls"] == 8 == len(model.requests)
    assert row["agreement"] == 1.0
    assert row["tokens_in"] > 0 and row["tokens_out"] == 160
    # the agent really read module files, not the ticket's: both disagree with the record
    assert row["full_vs_real"] == row["compacted_vs_real"] == 0.0
    asked = model.requests[0].messages
    assert asked[0] == {"role": "system", "content": "You are a coding agent."}
    assert asked[-1]["content"].endswith("or null}.")


def test_a_policy_that_drops_the_task_disagrees(tmp_path: Path, capsys: Any) -> None:
    row = _behaviour(tmp_path, FunctionModel(_agent), "trim", 4, capsys)
    assert row["sampled"] == 4
    assert row["agreement"] == 0.0  # trim_messages cut the ticket from every sampled prompt


def test_failures_are_counted_not_raised(tmp_path: Path, capsys: Any) -> None:
    def overflow(request: ModelRequest) -> Any:
        raise RuntimeError("context_length_exceeded")

    row = _behaviour(tmp_path, FunctionModel(overflow), "claude-code", 3, capsys)
    assert row["failed"] == 3 and row["agreement"] is None and row["calls"] == 6


def test_bench_behaviour_through_the_command_line(tmp_path: Path, capsys: Any) -> None:
    from openprogram.cli import main

    judge = FunctionModel(_agent, name="fake-judge")
    trace = _trace(tmp_path)
    argv = ["bench", str(trace), "--budget", "3000", "--policies", "claude-code,trim"]
    with override(model=judge):
        assert main([*argv, "--behaviour", "fake-judge", "--behaviour-turns", "3"]) == 0
    out = capsys.readouterr().out
    assert "next action, full history vs compacted prompt (fake-judge)" in out
    assert len(judge.requests) == 12  # 3 turns x 2 prompts x 2 policies
    with override(model=judge):
        assert main([*argv, "--behaviour", "fake-judge", "--behaviour-turns", "2", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    found = [line["behaviour"] for line in lines if "behaviour" in line]
    assert [(row["policy"], row["sampled"]) for row in found] == [("claude-code", 2), ("trim", 2)]
    assert found[0]["agreement"] == 1.0 and found[1]["agreement"] == 0.0
    assert len(lines) == 4  # and the two bench rows


def test_bench_refuses_a_behaviour_sample_of_no_turns(tmp_path: Path, capsys: Any) -> None:
    from openprogram.cli import main

    argv = ["bench", str(_trace(tmp_path)), "--behaviour", "fake-judge"]
    assert main([*argv, "--behaviour-turns", "0"]) == 2
    assert "--behaviour-turns must be at least 1, got 0" in capsys.readouterr().err
