"""The Agents SDK session with the SDK's own ``Runner`` and ``OpenAIChatCompletionsModel`` on
an ``AsyncOpenAI`` client pointed at the fake provider on 127.0.0.1: a ten-round agent under
a small budget, what the provider received, a history tool reading back a collapse, a
rollback — and the session's items exactly as the SDK wrote them."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _adapter_helpers import (
    EXPAND,
    ROUNDS,
    SYSTEM,
    TASK,
    lookup,
    newest_layer,
    restored_texts,
    small_session,
)
from _fake_provider import FakeProvider

pytest.importorskip("agents")

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.memory import SessionSettings
from agents.run_config import CallModelData, ModelInputData
from openai import AsyncOpenAI

from context import HeuristicSummarizer
from graph import Tool, layer_handle, text_of
from openprogram import HISTORY_TOOLS, Session
from openprogram.integrations.openai_agents import OpenProgramSession


@pytest.fixture(autouse=True)
def _no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)
    yield


def _agent(fake: FakeProvider, memory: OpenProgramSession) -> tuple[Agent[Any], AsyncOpenAI]:
    client = AsyncOpenAI(base_url=fake.base_url, api_key="test-key", max_retries=0)
    model = OpenAIChatCompletionsModel("gpt-4o-mini", client)
    tools = [function_tool(lookup), *memory.tools]
    return Agent("researcher", instructions=SYSTEM, tools=tools, model=model), client


def _sent(fake: FakeProvider, index: int = -1) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = fake.requests[index].body["messages"]
    return messages


def _text(messages: list[dict[str, Any]]) -> str:
    pieces = []
    for message in messages:
        pieces.append(text_of(message.get("content")))
        for call in message.get("tool_calls") or ():
            pieces.append(call["function"]["arguments"])
    return "\n".join(pieces)


def test_compaction_read_back_and_rollback(tmp_path: Path, fake_provider: FakeProvider) -> None:
    session = small_session(tmp_path)
    memory = OpenProgramSession(session)
    agent, client = _agent(fake_provider, memory)
    config = RunConfig(call_model_input_filter=memory.input_filter)

    async def run(prompt: str) -> Any:
        return await Runner.run(agent, prompt, session=memory, run_config=config, max_turns=20)

    async def scenario() -> None:
        for turn in range(1, ROUNDS + 1):
            fake_provider.reply_tool_call("lookup", json.dumps({"key": f"k_{turn}"}))
        fake_provider.reply("done")
        assert (await run(TASK)).final_output == "done"

        # What the provider received: the SDK's own conversion while nothing is
        # compacted; a collapse in place of the first rounds later.
        first = _sent(fake_provider, 1)
        assert [m["role"] for m in first] == ["system", "user", "assistant", "tool"]
        assert first[0]["content"] == SYSTEM and first[1]["content"] == TASK
        assert first[3]["content"] == lookup("k_1")
        assert "collapse" in {r.tier for r in session.engine.records()}
        late = _text(_sent(fake_provider, ROUNDS - 1))
        assert "[Collapsed:" in late and lookup("k_1") not in late

        # The session's items are the SDK's, whole: every output uncut.
        items = await memory.get_items()
        outputs = [i["output"] for i in items if i.get("type") == "function_call_output"]
        assert outputs == [lookup(f"k_{i}") for i in range(1, 11)]

        # The model reads a collapsed output back through a history tool.
        found = EXPAND.search(_text(_sent(fake_provider)))
        assert found
        fake_provider.reply_tool_call("expand_layer", json.dumps({"id": found.group(1)}))
        fake_provider.reply("read it")
        assert (await run("Read back the first lookups.")).final_output == "read it"
        answer = _sent(fake_provider)[-1]
        assert answer["role"] == "tool" and lookup("k_1") in answer["content"]

        # Roll back the newest layer from our side: the next request shows what it replaced.
        layer = newest_layer(session)
        originals = restored_texts(session, layer)
        session.engine.rollback(layer.id)
        fake_provider.reply("nothing else")
        await run("Anything else?")
        sent = _text(_sent(fake_provider))
        assert all(text in sent for text in originals)
        assert f'expand_layer("{layer_handle(layer)}")' not in sent and "Anything else?" in sent
        await client.close()

    asyncio.run(scenario())

    # Every item is in the graph; calls and results are tool nodes with the SDK's ids.
    tools = [n for n in session.graph.nodes() if isinstance(n.payload, Tool)]
    assert [t.payload.name for t in tools].count("lookup") == ROUNDS  # type: ignore[union-attr]
    assert text_of(tools[0].result.content) == lookup("k_1")  # type: ignore[union-attr]
    assert {t.payload.name for t in tools} == {"lookup", "expand_layer"}  # type: ignore[union-attr]
    assert {t.name for t in memory.tools} == set(HISTORY_TOOLS)


ITEMS: list[Any] = [
    {"role": "user", "content": "find k_1"},
    {
        "type": "function_call",
        "call_id": "c1",
        "name": "lookup",
        "arguments": '{"key": "k_1"}',
        "id": "__fake_id__",
        "provider_data": {"model": "m", "response_id": "r1"},
    },
    {"type": "function_call_output", "call_id": "c1", "output": "value of k_1"},
    {
        "id": "__fake_id__",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "It is 1.", "annotations": [], "logprobs": []}],
    },
]


def test_items_come_back_exactly_and_pop_is_a_head_move(tmp_path: Path) -> None:
    session = Session(tmp_path / "op.db", "s1")
    memory = OpenProgramSession(session)

    async def scenario() -> None:
        await memory.add_items(ITEMS[:1])
        await memory.add_items(ITEMS[1:])
        assert await memory.get_items() == ITEMS
        assert await memory.get_items(limit=2) == ITEMS[2:]
        assert await memory.get_items(limit=0) == []
        assert await memory.get_items(limit=-1) == ITEMS
        limited = OpenProgramSession(session, session_settings=SessionSettings(limit=1))
        assert await limited.get_items() == ITEMS[3:]
        assert await memory.pop_item() == ITEMS[3]
        assert await memory.pop_item() == ITEMS[2]
        assert await memory.get_items() == ITEMS[:2]
        # the SDK answers the call again, differently: the call is asked again on a branch
        again = {"type": "function_call_output", "call_id": "c1", "output": "value of k_1, v2"}
        await memory.add_items([again])
        assert await memory.get_items() == [*ITEMS[:2], again]
        # a reopened session returns the same items, and clearing keeps every node
        reopened = OpenProgramSession(Session(tmp_path / "op.db", "s1"))
        assert await reopened.get_items() == [*ITEMS[:2], again]
        await reopened.clear_session()
        assert await reopened.get_items() == []
        assert await reopened.pop_item() is None

    asyncio.run(scenario())
    graph = Session(tmp_path / "op.db", "s1").graph
    results = [text_of(n.result.content) for n in graph.nodes() if n.result is not None]
    assert results == ["value of k_1", "value of k_1, v2"]
    assert [n.role for n in graph.nodes() if n.kind == "dialogue"] == [
        "user",
        "assistant",
        "assistant",
        "assistant",
    ]


def test_the_filter_passes_the_sdks_own_items_when_nothing_is_compacted(tmp_path: Path) -> None:
    memory = OpenProgramSession(Session(tmp_path / "op.db", budget=50_000))
    hosted = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    items = [*ITEMS, hosted]
    data = CallModelData(ModelInputData(input=items, instructions=SYSTEM), Agent("a"), None)
    out = asyncio.run(memory.input_filter(data))
    assert out.instructions == SYSTEM
    assert all(a is b for a, b in zip(out.input, items, strict=True))


class _Held(HeuristicSummarizer):
    """The offline summarizer, held until released: a compaction that takes its time."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def summarize(self, request: Any) -> Any:
        self.entered.set()
        assert self.release.wait(30)
        return super().summarize(request)


def test_an_item_added_while_a_compaction_runs_is_kept(tmp_path: Path) -> None:
    held = _Held()
    session = small_session(tmp_path)
    session.engine.summarizer = held
    memory = OpenProgramSession(session)
    items: list[Any] = [{"role": "user", "content": TASK}]
    for turn in range(1, ROUNDS + 1):
        call = {"type": "function_call", "call_id": f"c{turn}", "name": "lookup"}
        items.append({**call, "arguments": json.dumps({"key": f"k_{turn}"})})
        items.append(
            {"type": "function_call_output", "call_id": f"c{turn}", "output": lookup(f"k_{turn}")}
        )
    late = {"role": "user", "content": "written while the compaction ran"}
    agent = Agent("a", tools=[function_tool(lookup), *memory.tools])
    data = CallModelData(ModelInputData(input=items, instructions=SYSTEM), agent, None)

    async def scenario() -> list[Any]:
        await memory.add_items(items)
        render = asyncio.create_task(memory.input_filter(data))
        assert await asyncio.to_thread(held.entered.wait, 10)
        write = asyncio.create_task(memory.add_items([late]))
        await asyncio.sleep(0.05)
        held.release.set()
        rendered = await render
        await write
        return list(rendered.input)

    rendered = asyncio.run(scenario())
    summaries = ("[Collapsed:", "[Context Compaction]")  # a summary layer, whichever tier made it
    assert any(str(item.get("content")).startswith(summaries) for item in rendered)
    assert asyncio.run(memory.get_items()) == [*items, late]
    assert session.graph.get(memory.mirror.head or "").payload.content == late["content"]  # type: ignore[union-attr]


def test_a_redacting_session_stores_the_sdks_items_redacted(tmp_path: Path) -> None:
    key = "sk-proj-" + "Q7" * 24
    items: list[Any] = [
        {"role": "user", "content": f"deploy with OPENAI_API_KEY={key}"},
        {"role": "assistant", "content": "done"},
    ]
    session = Session(tmp_path / "r.db", "r", redact=True, state_dir=tmp_path / "state")
    memory = OpenProgramSession(session)
    asyncio.run(memory.add_items(items))
    assert asyncio.run(memory.get_items()) == items  # exact in the process that wrote them
    session.close()
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("r.db*"))
    assert key.encode() not in stored  # neither in the nodes nor in the stored items
    again = OpenProgramSession(Session(tmp_path / "r.db", "r"))
    assert key not in json.dumps(asyncio.run(again.get_items()))
    assert "[REDACTED" in json.dumps(asyncio.run(again.get_items()))
