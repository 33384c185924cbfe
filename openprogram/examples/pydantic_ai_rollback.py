"""A Pydantic AI agent on OpenProgram's context engine, and a compaction rolled back from
our side.

The agent researches a question in Harbor's documents (``search`` and ``read`` from
``corpus``) under a small budget, through :class:`OpenProgramCapability`: every message is
stored in the session's graph and each request goes out compacted, while the run's own
history stays whole. Afterwards we list the layers the compactions made, roll the newest
one back with ``session.engine.rollback``, and ask a follow-up: its request shows the
originals again. Offline it runs on a scripted ``FunctionModel``; online it takes any
Pydantic AI model name::

    python -m openprogram.examples.pydantic_ai_rollback --model openai:gpt-4o-mini
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from context import COLLAPSE_FIRST_CASCADE, Policy
from graph import LayerInfo, Tool
from openprogram import Session
from openprogram._runtime._history import node_text
from openprogram.examples.corpus import QUESTIONS, read, search
from openprogram.integrations.pydantic_ai import OpenProgramCapability

__all__ = ["main", "scripted_model"]

QUESTION = "Why do requests to /api/export time out?"
SYSTEM = "You research questions about Harbor by searching and reading its documents."
FOLLOW_UP = "Which documents did you read?"


def scripted_model() -> FunctionModel:
    """A model that searches each topic of the question, reads the two best documents of
    each search, then answers (and answers a follow-up by naming what it read)."""
    topics = list(QUESTIONS[QUESTION][1])
    read_ids: list[str] = []

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if returns and returns[-1].tool_name == "search" and isinstance(returns[-1].content, list):
            ids = [str(hit["id"]) for hit in returns[-1].content[:2]]
            read_ids.extend(ids)
            calls = [ToolCallPart("read", {"doc_id": i}, f"read_{i}") for i in ids]
            return ModelResponse(parts=calls)
        if isinstance(last, ModelRequest) and returns and topics:
            topic = topics.pop(0)
            return ModelResponse(parts=[ToolCallPart("search", {"query": topic}, f"s_{topic}")])
        if topics and not returns:
            topic = topics.pop(0)
            return ModelResponse(parts=[ToolCallPart("search", {"query": topic}, f"s_{topic}")])
        return ModelResponse(parts=[TextPart(f"I read {', '.join(read_ids)}.")])

    return FunctionModel(reply)


def newest_layer(session: Session) -> LayerInfo | None:
    """The newest active layer no other builds on (a rollback restores just it)."""
    layers = session.graph.layers(active=True)
    built_on = {b for info in layers for b in info.layer.builds_on}
    free = [info for info in layers if info.id not in built_on]
    return free[-1] if free else None


def _originals(session: Session, layer: LayerInfo) -> list[str]:
    """What must show again once ``layer`` is rolled back: the summaries of the layers it
    built on, its messages' texts and its tool calls' ids (outputs may show offloaded)."""
    under = {
        node
        for info in session.graph.layers()
        if info.id in layer.layer.builds_on
        for node in info.layer.covers
    }
    shown = [f'"{b}"' for b in layer.layer.builds_on]
    for node_id in layer.covers:
        node = session.graph.get(node_id)
        if node_id in under:
            continue
        if isinstance(node.payload, Tool):
            shown.append(node.payload.call_id)
        elif node_text(node):
            shown.append(node_text(node))
    return shown


def main(
    db: str | os.PathLike[str] = ":memory:",
    *,
    model: Model | str | None = None,
    budget: int = 8_000,
    state_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Run the agent, roll back its newest compaction, ask a follow-up; return what
    happened (and print it)."""
    policy = Policy.claude_code(  # with collapse before auto-compact: short layers to roll back
        None,
        cascade=COLLAPSE_FIRST_CASCADE,
        microcompact_first=50,
        microcompact_every=25,
        collapse_min_rounds=2,
        collapse_max_rounds=3,
        collapse_keep_recent=2,
        offload_chars_per_token=None,
    )
    session = Session(db, budget=budget, policy=policy, state_dir=state_dir)
    agent = Agent(
        model or scripted_model(),
        capabilities=[OpenProgramCapability(session)],
        tools=[search, read],
        system_prompt=SYSTEM,
    )
    result = agent.run_sync(QUESTION)
    tiers = sorted({record.tier for record in session.engine.records()})
    layer = newest_layer(session)
    report: dict[str, Any] = {
        "session": session.id,
        "answer": result.output,
        "messages": len(result.all_messages()),
        "tiers": tiers,
        "layers": [info.id for info in session.graph.layers()],
    }
    print(f"answer: {result.output}")
    print(f"the run's own history: {report['messages']} messages, whole")
    print(f"tiers that acted: {', '.join(tiers) or 'none'}")
    if layer is not None:
        session.engine.rollback(layer.id, reason="look at the originals again")
        follow = agent.run_sync(FOLLOW_UP, message_history=result.all_messages())
        rendered = session.engine.last
        sent = str(rendered.messages) if rendered is not None else ""
        shown = _originals(session, layer)
        report.update(
            rolled_back=layer.id,
            kind=layer.kind,
            follow_up=follow.output,
            restored=all(text in sent for text in shown) and f'"{layer.id}"' not in sent,
        )
        print(f"rolled back {layer.kind} layer {layer.id} ({len(layer.covers)} nodes)")
        print(f"the follow-up's request shows its originals again: {report['restored']}")
    session.close()
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="A Pydantic AI agent on OpenProgram.")
    parser.add_argument("--model", help="a Pydantic AI model name (default: scripted, offline)")
    parser.add_argument("--db", default=":memory:")
    parser.add_argument("--budget", type=int, default=8_000)
    arguments = parser.parse_args()
    main(arguments.db, model=arguments.model, budget=arguments.budget)
