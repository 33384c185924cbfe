"""Issue 33, item 4, through each framework: a layer is made, rolled back with the CLI,
and the framework's next request is what the rollback said it would be. The rounds it
restored are shown whole where they fit (no "[N earlier round(s) were removed]" note in
a request under its budget: a round of 2k+ tokens came back snipped in a 4,091-token
request at budget 7,000); where they do not, the layers the record named are made again,
and ``collapses`` gives each the reason "after rollback of X"."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _fake_provider import FakeProvider

from context import RollbackFacts
from graph import text_of
from openprogram import Session, node_text
from openprogram.cli import main

BUDGET = 7_000
REMOVED = re.compile(r"\[\d+ earlier round\(s\) were removed")
SYSTEM = "You look things up."
Next = Callable[[], str]
"""One more turn through the framework: the text of the request its model received."""


def _lookup(big: int) -> Callable[[str], str]:
    def lookup(key: str) -> str:
        """Look up a key in the knowledge base.

        Args:
            key: what to look up, like k_3
        """
        words = " ".join(f"w{i}" for i in range(1_100 if key == f"k_{big}" else 150))
        return f"value of {key}: {words} end of {key}"

    return lookup


def _session(tmp_path: Path) -> Session:
    return Session(tmp_path / "op.db", budget=BUDGET, state_dir=tmp_path / "state")


def _pydantic_ai(tmp_path: Path, rounds: int, big: int) -> tuple[Session, Next]:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from openprogram.integrations.pydantic_ai import OpenProgramCapability

    session = _session(tmp_path)
    requests: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append(list(messages))
        if len(requests) <= rounds:
            key = {"key": f"k_{len(requests)}"}
            call = ToolCallPart("lookup", key, tool_call_id=f"c{len(requests)}")
            return ModelResponse(parts=[TextPart(f"step {len(requests)}"), call])
        return ModelResponse(parts=[TextPart(f"done {len(requests)}")])

    capability = OpenProgramCapability(session)
    agent = Agent(FunctionModel(model), capabilities=[capability], system_prompt=SYSTEM,
                  tools=[_lookup(big)])  # fmt: skip
    history = agent.run_sync(f"Look up k_1 to k_{rounds}.").all_messages()

    def next_turn() -> str:
        agent.run_sync("Anything else?", message_history=history)
        return "\n".join(
            content
            for message in requests[-1]
            for part in message.parts
            if isinstance(content := getattr(part, "content", None), str)
        )

    return session, next_turn


def _langchain(tmp_path: Path, rounds: int, big: int) -> tuple[Session, Next]:
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, BaseMessage

    from openprogram.integrations.langchain import OpenProgramMiddleware

    received: list[list[BaseMessage]] = []

    class Recording(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Recording:  # type: ignore[override]
            return self

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            received.append(list(messages))
            return super()._generate(messages, *args, **kwargs)

    def script() -> Iterator[AIMessage]:
        for turn in range(1, rounds + 1):
            call = {"name": "lookup", "args": {"key": f"k_{turn}"}, "id": f"c{turn}"}
            yield AIMessage(content=f"step {turn}", tool_calls=[call])
        yield AIMessage(content="done")
        yield AIMessage(content="done again")

    session = _session(tmp_path)
    middleware = OpenProgramMiddleware(session)
    agent = create_agent(Recording(messages=script()), tools=[_lookup(big)],
                         middleware=[middleware], system_prompt=SYSTEM)  # fmt: skip
    task = {"role": "user", "content": f"Look up k_1 to k_{rounds}."}
    history = agent.invoke({"messages": [task]})["messages"]

    def next_turn() -> str:
        agent.invoke({"messages": [*history, {"role": "user", "content": "Anything else?"}]})
        return "\n".join(
            m.content if isinstance(m.content, str) else text_of(m.content)  # type: ignore[arg-type]
            for m in received[-1]
        )

    return session, next_turn


def _openai_agents(
    tmp_path: Path, rounds: int, big: int, fake: FakeProvider
) -> tuple[Session, Next]:
    pytest.importorskip("agents")
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        RunConfig,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    from openprogram.integrations.openai_agents import OpenProgramSession

    set_tracing_disabled(True)
    session = _session(tmp_path)
    memory = OpenProgramSession(session)
    config = RunConfig(call_model_input_filter=memory.input_filter)

    async def run(prompt: str) -> None:
        client = AsyncOpenAI(base_url=fake.base_url, api_key="test-key", max_retries=0)
        model = OpenAIChatCompletionsModel("gpt-4o-mini", client)
        agent = Agent("researcher", instructions=SYSTEM, model=model,
                      tools=[function_tool(_lookup(big)), *memory.tools])  # fmt: skip
        await Runner.run(agent, prompt, session=memory, run_config=config, max_turns=40)
        await client.close()

    for turn in range(1, rounds + 1):
        fake.reply_tool_call("lookup", json.dumps({"key": f"k_{turn}"}))
    fake.reply("done")
    asyncio.run(run(f"Look up k_1 to k_{rounds}."))

    def next_turn() -> str:
        fake.reply("nothing else")
        asyncio.run(run("Anything else?"))
        return "\n".join(text_of(m.get("content")) for m in fake.requests[-1].body["messages"])

    return session, next_turn


@pytest.fixture(params=["pydantic_ai", "langchain", "openai_agents"])
def framework(
    request: pytest.FixtureRequest, fake_provider: FakeProvider
) -> Callable[[Path, int, int], tuple[Session, Next]]:
    if request.param == "openai_agents":
        return lambda path, rounds, big: _openai_agents(path, rounds, big, fake_provider)
    chosen: Callable[[Path, int, int], tuple[Session, Next]] = {
        "pydantic_ai": _pydantic_ai,
        "langchain": _langchain,
    }[request.param]
    return chosen


def _collapses(db: Path, session: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["collapses", session, "--db", str(db), "--json"]) == 0
    return {layer["id"]: layer for layer in json.loads(capsys.readouterr().out)}


def _rolled_back(
    tmp_path: Path,
    framework: Callable[[Path, int, int], tuple[Session, Next]],
    capsys: pytest.CaptureFixture[str],
    rounds: int,
    big: int,
) -> dict[str, Any]:
    """Run, roll the compaction back with the CLI, run one more turn: what each said."""
    session, next_turn = framework(tmp_path, rounds, big)
    db = tmp_path / "op.db"
    layer = next(i for i in session.graph.layers(active=True) if i.kind == "compact")
    known = _collapses(db, session.id, capsys)
    rollback = ["rollback", session.id, layer.id, "--db", str(db), "--state-dir",
                str(tmp_path / "state")]  # fmt: skip
    assert main(rollback) == 0
    printed = capsys.readouterr().out
    record = session.engine.records()[-1]
    facts = record.facts
    assert isinstance(facts, RollbackFacts) and facts.layers == [layer.id]
    sent = next_turn()
    listed = _collapses(db, session.id, capsys)
    made = [session.graph.layer(x) for x in listed if x not in known]
    again = {n for info in made for n in info.covers}
    whole = [t for n in layer.covers if n not in again and (t := node_text(session.graph.get(n)))]
    last = session.engine.last
    assert last is not None
    return {"layer": layer.id, "printed": printed, "facts": facts, "record": record,
            "sent": sent, "made": made, "listed": listed, "whole": whole,
            "tokens": last.tokens, "again": again, "covers": set(layer.covers)}  # fmt: skip


def test_a_restored_round_is_not_snipped_in_a_request_under_budget(
    tmp_path: Path,
    framework: Callable[[Path, int, int], tuple[Session, Next]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The compaction covered rounds 1–10; the 11th, of 2k+ tokens, came after it. Rolled
    back, the ten come back whole and only the 11th is compacted again, as the record
    said; before the fix a snip dropped five of them to reach its low-water mark, under
    the budget (4,091 tokens of 7,000)."""
    seen = _rolled_back(tmp_path, framework, capsys, rounds=14, big=11)
    facts, made = seen["facts"], seen["made"]
    assert seen["tokens"] <= BUDGET
    assert not REMOVED.search(seen["sent"])
    assert [t for t in seen["whole"] if t not in seen["sent"]] == []
    assert seen["whole"] and seen["again"].isdisjoint(seen["covers"])  # all shown whole
    said = [(m.kind, m.covers, m.first) for m in facts.again]
    assert said == [(x.kind, len(x.covers), x.covers[0]) for x in made] != []
    assert "do not all fit" in seen["printed"]
    assert all(m.first in seen["printed"] for m in facts.again)
    reason = f"after rollback of {seen['layer']}"
    assert [seen["listed"][x.id]["reason"] for x in made] == [reason] * len(made)


def test_restored_rounds_that_do_not_fit_are_made_again_as_the_record_said(
    tmp_path: Path,
    framework: Callable[[Path, int, int], tuple[Session, Next]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The compaction covered the 3rd round, of 2k+ tokens: rolled back, its rounds do not
    fit, and the next request makes again the layers the record named, from the nodes it
    named, listed with the reason; nothing is snipped. A collapse may take a round more
    than the record said (Pydantic AI, LangChain: 16 nodes for 14): the record measured
    the prompt at the rollback, and the next turn's messages move the newest rounds a
    collapse keeps out of it."""
    seen = _rolled_back(tmp_path, framework, capsys, rounds=12, big=3)
    facts, made = seen["facts"], seen["made"]
    assert seen["tokens"] <= BUDGET
    assert not REMOVED.search(seen["sent"])
    assert [t for t in seen["whole"] if t not in seen["sent"]] == []
    said = [(m.kind, m.first) for m in facts.again]
    assert said == [(x.kind, x.covers[0]) for x in made] != []
    assert all(len(x.covers) >= m.covers for m, x in zip(facts.again, made, strict=True))
    assert all(m.first in seen["printed"] for m in facts.again)
    assert "do not all fit" in seen["printed"]
    reason = f"after rollback of {seen['layer']}"
    assert [seen["listed"][x.id]["reason"] for x in made] == [reason] * len(made)
