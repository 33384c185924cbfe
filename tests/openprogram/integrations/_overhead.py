"""The adapters' overhead scenario (issue 35, item 4): each framework's own fake model,
1,000 messages of history, one short request at a time, with and without the adapter.

``request(framework, adapter, db)`` builds the agent (and, with the adapter, a session over
``db`` already holding the history) and returns one request to call repeatedly. Run as a
script (``python _overhead.py FRAMEWORK adapter|alone DB``) it times the agent's build and
then the first request of a fresh process (printed in that order, in seconds): the
framework's modules (and the adapter's) are imported first and not counted."""

from __future__ import annotations

import asyncio
import gc
import importlib
import itertools
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from openprogram import Session

FRAMEWORKS = ("pydantic_ai", "langchain", "openai_agents")
MESSAGES = 1_000
BUDGET = 128_000
SYSTEM = "You answer briefly."
ANSWER = "It is a thing."
THREAD_ID = "bench-conversation"
"""The conversation the history belongs to (as a previous run's messages carry it)."""
THREAD = {"configurable": {"thread_id": THREAD_ID}}


def texts() -> list[tuple[str, str]]:
    """The stored history: 500 rounds of a short question and its answer."""
    return [
        (f"What is item {n}? Say it in a few words.", f"Item {n} is a w{n} thing.")
        for n in range(MESSAGES // 2)
    ]


def open_session(db: Path) -> Session:
    return Session(db, "bench", budget=BUDGET, state_dir=db.parent / "state")


def _pydantic_ai(adapter: bool, db: Path) -> Callable[[], Any]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from openprogram.integrations.pydantic_ai import OpenProgramCapability

    history: list[ModelMessage] = []
    for question, reply in texts():
        history += [
            ModelRequest(parts=[UserPromptPart(question)], conversation_id=THREAD_ID),
            ModelResponse(parts=[TextPart(reply)], conversation_id=THREAD_ID),
        ]

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(ANSWER)])

    agent = Agent(FunctionModel(answer), instructions=SYSTEM)
    capabilities = [OpenProgramCapability(open_session(db))] if adapter else []
    return lambda: (
        agent.run_sync(
            "And the next one?", message_history=history, capabilities=capabilities
        ).output
    )


def _langchain(adapter: bool, db: Path) -> Callable[[], Any]:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

    from openprogram.integrations.langchain import OpenProgramMiddleware

    history: list[BaseMessage] = []
    for n, (question, answer) in enumerate(texts()):
        history += [HumanMessage(question, id=f"h{n}"), AIMessage(answer, id=f"a{n}")]

    def answers() -> Iterator[AIMessage]:
        for n in itertools.count():
            yield AIMessage(ANSWER, id=f"r{n}")

    middleware = [OpenProgramMiddleware(open_session(db))] if adapter else []
    agent = create_agent(
        GenericFakeChatModel(messages=answers()), system_prompt=SYSTEM, middleware=middleware
    )
    request = {"messages": [*history, HumanMessage("And the next one?", id="next")]}
    return lambda: agent.invoke(request, THREAD)["messages"][-1].content  # type: ignore[call-overload]


def _agents_sdk() -> tuple[Any, list[Any]]:
    """The Agents SDK's agent on its fake model, with tracing off, and the history as items."""
    from _agents_fakes import Answering
    from agents import Agent, set_tracing_disabled

    set_tracing_disabled(True)
    history: list[Any] = []
    for question, answer in texts():
        history += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return Agent("helper", instructions=SYSTEM, model=Answering(ANSWER, record=False)), history


def _openai_agents(adapter: bool, db: Path) -> Callable[[], Any]:
    from agents import Runner

    from openprogram.integrations.openai_agents import OpenProgramSession

    agent, history = _agents_sdk()
    if not adapter:
        items = [*history, {"role": "user", "content": "And the next one?"}]
        return lambda: Runner.run_sync(agent, items).final_output
    memory = OpenProgramSession(open_session(db))
    if not asyncio.run(memory.get_items()):
        asyncio.run(memory.add_items(history))
    return lambda: memory.run_sync(agent, "And the next one?").final_output


def agents_sdk_own_session(db: Path) -> Callable[[], Any]:
    """The Agents SDK's request over its own ``SQLiteSession`` holding the same history: what
    any SDK ``Session`` costs the run (its reading, deduplication and normalisation of the
    1,000 items), to set the adapter's figure beside."""
    from agents import Runner, SQLiteSession

    agent, history = _agents_sdk()
    memory = SQLiteSession(THREAD_ID, db)
    if not asyncio.run(memory.get_items()):
        asyncio.run(memory.add_items(history))
    return lambda: Runner.run_sync(agent, "And the next one?", session=memory).final_output


def request(framework: str, adapter: bool, db: Path) -> Callable[[], Any]:
    """One request of ``framework``'s agent, built once (see the module docstring)."""
    build = {"pydantic_ai": _pydantic_ai, "langchain": _langchain, "openai_agents": _openai_agents}
    return build[framework](adapter, db)


def first_request(framework: str, adapter: bool, db: Path) -> tuple[float, float]:
    """Seconds the agent's build (the adapter's included) and then the first request of
    this process take."""
    start = time.perf_counter()
    run = request(framework, adapter, db)
    built = time.perf_counter()
    run()
    return built - start, time.perf_counter() - built


IMPORTS = {
    "pydantic_ai": ("pydantic_ai", "pydantic_ai.models.function"),
    "langchain": ("langchain.agents", "langchain_core.language_models.fake_chat_models"),
    "openai_agents": ("agents", "openai.types.responses"),
}
"""What a framework's agent is built from, imported before the build is timed."""


if __name__ == "__main__":
    name, mode, path = sys.argv[1:4]
    for module in IMPORTS[name]:
        importlib.import_module(module)
    if mode == "adapter":
        importlib.import_module(f"openprogram.integrations.{name}")
    print(*first_request(name, mode == "adapter", Path(path)))


def collect_leftovers() -> None:
    """A test's leftovers collected now (Pydantic AI's run iterators), and the event loop
    ``run_sync`` kept for this thread closed with its generators, so no later test meets
    their warnings."""
    gc.collect()
    try:  # the loop run_sync kept for this thread: its generators closed while it runs
        loop = asyncio.get_event_loop()
    except RuntimeError:
        return
    if not loop.is_running() and not loop.is_closed():
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    asyncio.set_event_loop(None)
