"""A conversation's requests decoded and converted from the last ones' (the bytes and items
they repeat), and built back with what the last one built for the messages compaction
made, go upstream exactly as if each were decoded, converted and built whole: an item the
client changed anywhere, took away or reformatted is always noticed."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openprogram.proxy import Proxy, ProxyConfig

SESSION = {"x-openprogram-session": "kept"}
TOOLS = [{"type": "function", "name": "read_file", "description": "Read a file",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]  # fmt: skip
ANTHROPIC_TOOLS = [{"name": "Read", "description": "Read a file", "input_schema": TOOLS[0]["parameters"]}]  # fmt: skip
steps = st.lists(
    st.tuples(st.sampled_from(["turn", "turn", "edit", "rewind", "format"]), st.integers(0, 99)),
    min_size=1,
    max_size=7,
)


def _responses_turn(n: int, size: int) -> list[dict[str, Any]]:
    return [
        {"id": f"rs_{n}", "type": "reasoning", "summary": [], "encrypted_content": f"enc{n}"},
        {"id": f"fc_{n}", "type": "function_call", "call_id": f"call_{n}", "name": "read_file",
         "arguments": json.dumps({"path": f"m{n}.py"})},
        {"type": "function_call_output", "call_id": f"call_{n}",
         "output": f"def f{n}():\n" + "    pass  # body é\n" * size},
    ]  # fmt: skip


def _anthropic_turn(n: int, size: int) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": [
            {"type": "text", "text": f"Reading {n}."},
            {"type": "tool_use", "id": f"toolu_{n}", "name": "Read", "input": {"path": f"m{n}.py"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{n}",
             "content": f"def f{n}():\n" + "    pass  # body é\n" * size}]},
    ]  # fmt: skip


def _retyped(said: str, n: int) -> str:
    """``said`` changed: every other time in its last character only (the same length)."""
    return said[:-1] + ("!" if said[-1:] != "!" else "?") if n % 2 else f"changed {n}"


def _edited(item: dict[str, Any], n: int) -> dict[str, Any]:
    """``item`` with its text changed (a copy: the client's next request holds it)."""
    if "output" in item:
        return {**item, "output": _retyped(item["output"], n)}
    if isinstance(content := item.get("content"), list) and "tool_use_id" in content[0]:
        return {**item, "content": [{**content[0], "content": _retyped(content[0]["content"], n)}]}
    if "arguments" in item:
        return {**item, "arguments": json.dumps({"path": f"other{n}.py"})}
    if isinstance(content := item.get("content"), list):  # a breakpoint moved, or a text
        last = dict(content[-1])
        if last.pop("cache_control", None) is None:
            last["cache_control"] = {"type": "ephemeral"}
        first = content[0]
        if first.get("type") == "text" and n % 2:
            first = {**first, "text": f"changed {n}"}
        return {**item, "content": [first, *content[1:-1], last][-len(content) :]}
    return {**item, "summary": [{"type": "summary_text", "text": f"changed {n}"}]}


def _conversation(wire: str, budget: int, plan: list[tuple[str, int]], tmp: Path) -> None:
    """Each request of ``plan`` through a proxy that keeps its last bodies and conversions,
    and through one that forgets them before each request: the same body goes up."""
    kept = Proxy(ProxyConfig(db=":memory:", state_dir=str(tmp / uuid.uuid4().hex), budget=budget))
    whole = Proxy(ProxyConfig(db=":memory:", state_dir=str(tmp / uuid.uuid4().hex), budget=budget))
    turn = _responses_turn if wire == "responses" else _anthropic_turn
    history: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test"}]
    protocol, compact = ("responses", False), False
    try:
        for n, (step, at) in enumerate(plan):
            if step == "edit" and len(history) > 1:
                index = 1 + at % (len(history) - 1)
                history[index] = _edited(history[index], n)
            elif step == "rewind" and len(history) > 1:  # back to an earlier turn's end
                size = len(turn(0, 1))
                history = history[: 1 + size * (at % (len(history) // size))]
                history += turn(100 + n, 1 + at % 7)
            elif step == "format":
                compact = not compact
            if step == "turn" or history[-1].get("role") != "user":
                history += turn(n, 1 + at % 40)
            protocol = (wire, compact)
            body = (
                {"model": "gpt-5", "instructions": "Be brief.", "tools": TOOLS, "input": history}
                if wire == "responses"
                else {"model": "claude-sonnet-4-5", "max_tokens": 64, "system": "Be brief.",
                      "tools": ANTHROPIC_TOOLS, "messages": history}
            )  # fmt: skip
            separators = (",", ":") if compact else (", ", ": ")
            raw = json.dumps(body, separators=separators, ensure_ascii=compact).encode()
            # internal: this proxy forgets the bodies, conversions and made messages it kept,
            # so it decodes, converts and builds each request whole (what reuse must equal)
            whole._bodies = type(whole._bodies)()
            whole._converted.clear()
            sent = kept.prepare(wire, SESSION, raw)
            expected = whole.prepare(wire, SESSION, raw)
            assert sent.event == expected.event == "sent", (sent.reason, expected.reason)
            assert json.loads(sent.body) == json.loads(expected.body), (protocol, n)
            if budget > 50_000:  # nothing compacted: the client's own history goes up
                assert (
                    json.loads(sent.body)["input" if wire == "responses" else "messages"]
                    == (json.loads(raw)["input" if wire == "responses" else "messages"])
                )
    finally:
        kept.close()
        whole.close()


@pytest.mark.parametrize("wire", ["responses", "anthropic"])
@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(plan=steps, budget=st.sampled_from([2_500, 100_000]))
def test_a_conversation_goes_up_as_if_each_request_were_read_whole(
    tmp_path: Path, wire: str, plan: list[tuple[str, int]], budget: int
) -> None:
    _conversation(wire, budget, plan, tmp_path)


def test_an_old_item_changed_in_place_goes_up_changed(tmp_path: Path) -> None:
    """Regression: the shared part of two requests is found from their bytes and their
    items' identity; an old tool output the client rewrote must still go up rewritten."""
    proxy = Proxy(ProxyConfig(db=":memory:", state_dir=str(tmp_path / "s"), budget=100_000))
    try:
        history = [{"role": "user", "content": "Fix it"}]
        for n in range(6):
            history += _responses_turn(n, 3)
            body = {"model": "gpt-5", "tools": TOOLS, "input": history}
            proxy.prepare("responses", SESSION, json.dumps(body).encode())
        history[5] = {**history[5], "output": "[cleared by the client]"}
        body = {"model": "gpt-5", "tools": TOOLS, "input": [*history, *_responses_turn(6, 3)]}
        sent = json.loads(proxy.prepare("responses", SESSION, json.dumps(body).encode()).body)
        assert sent["input"] == body["input"]
        assert sent["input"][5]["output"] == "[cleared by the client]"
    finally:
        proxy.close()


def test_a_compacted_conversation_goes_up_as_if_each_request_were_built_whole(
    tmp_path: Path,
) -> None:
    """Turn after turn under a small budget (summaries, cleared outputs): the messages
    compaction made are built once and reused while the render hands them again."""
    for wire in ("responses", "anthropic"):
        plan = [("turn", 39)] * 10 + [("edit", 3), ("turn", 39), ("rewind", 8)]
        _conversation(wire, 2_000, [*plan, ("turn", 39), ("turn", 38)], tmp_path)
