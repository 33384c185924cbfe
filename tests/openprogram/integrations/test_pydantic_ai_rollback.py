"""A rollback through the Pydantic AI capability, with the default preset: the rounds the
layer stood for come back whole in the next request when they fit, even when a sticky snip
had dropped the layer's summary before the rollback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _adapter_helpers import lookup

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from openprogram import Session, node_text
from openprogram.integrations.pydantic_ai import OpenProgramCapability

ROUNDS = 30
REMOVED = re.compile(r"\[\d+ earlier round\(s\) were removed")


def _text(messages: list[ModelMessage]) -> str:
    pieces = []
    for message in messages:
        for part in message.parts:
            content = getattr(part, "content", None)
            if isinstance(content, str):
                pieces.append(content)
    return "\n".join(pieces)


def test_a_rollback_shows_the_layers_rounds_again_after_a_snip(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", budget=6_000, state_dir=tmp_path / "state")
    requests: list[list[ModelMessage]] = []

    def researcher(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append(list(messages))
        turn = len(requests)
        if turn <= ROUNDS:
            call = ToolCallPart("lookup", {"key": f"k_{turn}"}, tool_call_id=f"c{turn}")
            return ModelResponse(parts=[TextPart(f"step {turn}"), call])
        return ModelResponse(parts=[TextPart(f"done after {turn} requests")])

    agent = Agent(
        FunctionModel(researcher),
        capabilities=[OpenProgramCapability(session)],
        system_prompt="You look things up.",
        tools=[lookup],
    )
    result = agent.run_sync("Look up k_1 to k_30.")
    compaction = next(i for i in session.graph.layers() if i.kind == "compact")
    originals = [t for n in compaction.covers if (t := node_text(session.graph.get(n)))]
    assert lookup("k_1") in originals

    session.engine.budget = 2_000  # a tight turn: the snip drops the compaction too
    result = agent.run_sync("Briefly, k_1?", message_history=result.all_messages())
    assert REMOVED.search(_text(requests[-1]))

    session.engine.budget = 40_000  # room again: the rollback brings the rounds back
    session.engine.rollback(compaction.id)
    agent.run_sync("Anything else?", message_history=result.all_messages())
    sent = _text(requests[-1])
    assert [t for t in originals if t not in sent] == []
    assert not REMOVED.search(sent)
    assert "[Context Compaction]" not in sent
    rollback = session.engine.records()[-1]
    assert rollback.tier == "rollback" and rollback.tokens_after > rollback.tokens_before
