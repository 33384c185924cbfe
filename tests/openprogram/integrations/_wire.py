"""Long autonomous runs of each framework's own agent against the fake OpenAI-compatible
server, with every request's wire JSON counted.

A run is a few earlier user requests with some tool steps each (the history), then one
request the agent works on for many steps on its own. Each framework sends its requests
with its own OpenAI chat-completions code (Pydantic AI's ``OpenAIChatModel``, the Agents
SDK's ``OpenAIChatCompletionsModel``; for LangChain, whose OpenAI package is not installed
here, a chat model that builds the body with ``langchain_core``'s own OpenAI converters)
over HTTP to ``tests/_fake_provider.py``. What the wire holds is counted as the server
received it: the compact JSON of the request's ``messages`` (the system message or
instructions among them) and of its ``tools``, with tiktoken's cl100k.

Used by the adapters' wire tests and by ``bench-notes/budget_adapters.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _fake_provider import FakeProvider

from context import TokenCounter
from openprogram import Session

MODEL = "gpt-4o"
SYSTEM = "You audit a code base. Read every module you are asked about, one at a time."
HISTORY = ("Summarise the module layout.", "List the public entry points.", "Check the tests.")
REQUEST = (
    "Audit every module from m_1 on: read each with lookup, note what each exports, "
    'and flag any "TODO" you find. Report the list at the end.'
)


def lookup(key: str) -> str:
    """Read one module of the code base.

    Args:
        key: the module's name, like m_3
    """
    return module_text(key)


def search(query: str, limit: int = 5, path: str | None = None) -> str:
    """Search the code base for a string.

    Args:
        query: the text to look for
        limit: how many hits to return at most
        path: only under this folder
    """
    return f"{limit} hits for {query!r} under {path or '.'}: " + module_text(query)[:600]


PROSE = False
"""Outputs as plain prose (nothing JSON escapes) instead of source code: the bench's
``--prose``."""


def module_text(key: str) -> str:
    """A module's source: quotes, newlines and indents (what JSON escapes), mostly under
    2,000 characters, now and then over 4,000 (budget reduction) or 10,000 (offload)."""
    n = sum(ord(c) for c in key)
    size = 14_000 if n % 11 == 5 else 6_000 if n % 7 == 3 else 500 + (n * 37) % 1_500
    if PROSE:
        words = " ".join(f"{key} part {j} reads well and says little." for j in range(size // 30))
        return words[:size]
    lines = [f'"""Module {key}: helpers for the "{key}" feature."""', "", "import json", ""]
    j = 0
    while sum(len(line) + 1 for line in lines) < size:
        lines += [
            f"def {key}_f{j}(value, *, name='{key}_{j}'):",
            f'    """Return {{"key": "{key}", "n": {j}}} as JSON\\n (TODO: check)."""',
            f'    return json.dumps({{"name": name, "value": value, "tab": "\\t{j}"}})',
            "",
        ]
        j += 1
    return "\n".join(lines)[:size]


ENCODING = "cl100k_base"


def wire_tokens(body: Any) -> int:
    """cl100k tokens of what a chat-completions request holds besides its settings: the
    compact JSON (as the OpenAI SDK writes it) of its messages and of its tools."""
    counter = TokenCounter(encoding=ENCODING, strict=True)
    total = 0
    for key in ("messages", "tools"):
        if body.get(key):
            total += counter.count_text(
                json.dumps(body[key], ensure_ascii=False, separators=(",", ":"))
            )
    return total


def holds(body: Any, text: str) -> bool:
    """Whether a user message of the request holds ``text`` verbatim."""
    for message in body.get("messages") or ():
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        if isinstance(content, str) and text in content:
            return True
    return False


@dataclass
class Call:
    """One model request: the engine's count of it, the wire's, and the request it
    should hold."""

    ours: int
    wire: int
    request: str
    kept: bool


@dataclass
class Run:
    framework: str
    budget: int
    calls: list[Call] = field(default_factory=list)

    @property
    def over(self) -> list[Call]:
        return [c for c in self.calls if c.wire > self.budget]

    @property
    def lost(self) -> list[Call]:
        return [c for c in self.calls if not c.kept]

    def summary(self) -> dict[str, Any]:
        return {
            "framework": self.framework,
            "budget": self.budget,
            "requests": len(self.calls),
            "largest_ours": max(c.ours for c in self.calls),
            "largest_wire": max(c.wire for c in self.calls),
            "largest_gap": max(c.wire - c.ours for c in self.calls),
            "mean_gap": round(sum(c.wire - c.ours for c in self.calls) / len(self.calls), 1),
            "over_budget": len(self.over),
            "request_kept": len(self.calls) - len(self.lost),
        }


class _Script:
    """Queues the replies of one user request and records each of its model requests."""

    def __init__(self, fake: FakeProvider, run: Run, anchor: bool) -> None:
        self.fake, self.run, self.anchor = fake, run, anchor
        self.ours: Callable[[], int] = lambda: 0
        self.request = ""
        fake.prompt_tokens_of = self._received

    def _received(self, body: Any) -> int:
        wire = wire_tokens(body)
        call = Call(self.ours(), wire, self.request, holds(body, self.request))
        self.run.calls.append(call)
        return wire if self.anchor else 0

    def queue(self, request: str, steps: int, first: int) -> None:
        self.request = request
        for k in range(first, first + steps):
            if k % 9 == 4:
                arguments = {"query": f"TODO in m_{k}", "limit": 3, "path": "src"}
                self.fake.reply_tool_call("search", json.dumps(arguments))
            else:
                self.fake.reply_tool_call("lookup", json.dumps({"key": f"m_{k}"}))
        self.fake.reply(f"Done with: {request[:40]}")


def _turns(steps: int, history: int) -> list[tuple[str, int, int]]:
    turns, first = [], 100
    for request in HISTORY[:history]:
        turns.append((request, 6, first))
        first += 6
    turns.append((REQUEST, steps, 1))
    return turns


def run_pydantic_ai(
    fake: FakeProvider, session: Session, *, steps: int = 40, history: int = 3, anchor: bool = True
) -> Run:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.usage import UsageLimits

    from openprogram.integrations.pydantic_ai import OpenProgramCapability

    run = Run("pydantic_ai", session.engine.budget)
    script = _Script(fake, run, anchor)
    capability = OpenProgramCapability(session)
    script.ours = lambda: _last(capability.mirror)
    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=fake.base_url, api_key="k"))
    agent = Agent(model, instructions=SYSTEM, capabilities=[capability], tools=[lookup, search])
    messages: list[Any] = []
    for request, count, first in _turns(steps, history):
        script.queue(request, count, first)
        result = agent.run_sync(
            request, message_history=messages, usage_limits=UsageLimits(request_limit=None)
        )
        messages = result.all_messages()
    return run


def run_openai_agents(
    fake: FakeProvider, session: Session, *, steps: int = 40, history: int = 3, anchor: bool = True
) -> Run:
    from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    from openprogram.integrations.openai_agents import OpenProgramSession

    set_tracing_disabled(True)
    run = Run("openai_agents", session.engine.budget)
    script = _Script(fake, run, anchor)
    memory = OpenProgramSession(session)
    script.ours = lambda: _last(memory.mirror)
    client = AsyncOpenAI(base_url=fake.base_url, api_key="k")
    agent = Agent(
        name="auditor",
        instructions=SYSTEM,
        model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
        tools=[function_tool(lookup), function_tool(search)],
    )

    async def main() -> None:
        try:
            for request, count, first in _turns(steps, history):
                script.queue(request, count, first)
                await memory.run(agent, request, max_turns=count + 5)
        finally:
            await client.close()

    asyncio.run(main())
    return run


def run_langchain(
    fake: FakeProvider, session: Session, *, steps: int = 40, history: int = 3, anchor: bool = True
) -> Run:
    from _wire_langchain import WireChatModel
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from openprogram.integrations.langchain import OpenProgramMiddleware

    run = Run("langchain", session.engine.budget)
    script = _Script(fake, run, anchor)
    middleware = OpenProgramMiddleware(session)
    script.ours = lambda: _last(middleware.mirror)
    model = WireChatModel(base_url=fake.base_url, model=MODEL)
    agent = create_agent(
        model, tools=[lookup, search], system_prompt=SYSTEM, middleware=[middleware]
    )
    messages: list[Any] = []
    for request, count, first in _turns(steps, history):
        script.queue(request, count, first)
        state = agent.invoke(
            {"messages": [*messages, HumanMessage(request)]},
            {"recursion_limit": 4 * count + 20},
        )
        messages = list(state["messages"])
    return run


def _last(mirror: Any) -> int:
    return int(mirror.last.tokens) if mirror.last is not None else 0


RUNNERS: dict[str, Callable[..., Run]] = {
    "pydantic_ai": run_pydantic_ai,
    "langchain": run_langchain,
    "openai_agents": run_openai_agents,
}


def session_for(folder: Path, budget: int) -> Session:
    return Session(folder / "op.db", budget=budget, state_dir=folder / "state")


def runs(folder: Path, budget: int, frameworks: Sequence[str], **options: Any) -> list[Run]:
    """Each framework's run in a session of its own under ``folder``."""
    done = []
    for name in frameworks:
        fake = FakeProvider()
        try:
            os.makedirs(folder / name, exist_ok=True)
            session = session_for(folder / name, budget)
            try:
                done.append(RUNNERS[name](fake, session, **options))
            finally:
                session.close()
        finally:
            fake.close()
    return done
