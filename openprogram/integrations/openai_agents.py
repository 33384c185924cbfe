"""OpenProgram as an OpenAI Agents SDK ``Session``, with the filter that compacts each call.

    memory = OpenProgramSession(Session("agent.db"))
    result = memory.run_sync(agent, "…")  # or: await memory.run(agent, "…")

``run`` wires the three pieces a compacting session needs: the session itself, its
``input_filter`` as ``RunConfig.call_model_input_filter`` (without it nothing is compacted,
and the session warns), and the history tools in the agent's ``tools`` (without them a model
that reads a compacted output back ends the run with ``Tool read_output not found``); and
run hooks that anchor the counts on the input tokens the provider reports (the run's own
``hooks=`` are passed on). Wired by hand: ``Runner.run(agent.clone(tools=[*agent.tools,
*memory.tools]), …, session=memory, run_config=memory.run_config(), hooks=memory.hooks())``.

The session stores the exact items the SDK writes and returns exactly those: the SDK reads
``get_items`` back to check and rewind its own writes by comparing digests, so it must
never see our compacted copy there. ``pop_item`` is a head move (the item stays stored, and
the graph forks back), ``clear_session`` starts a new branch; nothing is ever deleted.
Items are converted to chat messages by the SDK's own ``Converter.items_to_messages``, so
the calls of one turn are one assistant message, as the model sent them (each call a tool
node, the SDK's ids in meta). The compacted rendering goes in through the filter: the SDK's
own items for what compaction left alone, new items for summaries, notes and cleared
outputs, and the agent's ``instructions``, stored as the session's system message (again
where they change) and counted in the budget. An item the SDK adds while a render runs
waits for it and is stored whole. ``memory.session`` gives layers, rollback and records.
Needs ``pip install 'openprogram[openai-agents]'``.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import hashlib
import json
import threading
import warnings
from collections.abc import Sequence
from typing import Any, TypeVar, cast

from agents import (
    Agent,
    FunctionTool,
    Model,
    ModelResponse,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    Runner,
    RunResult,
    Tool,
    function_tool,
)
from agents.exceptions import UserError
from agents.items import TResponseInputItem
from agents.memory import SessionABC, SessionSettings
from agents.memory.session_settings import resolve_session_limit
from agents.models.chatcmpl_converter import Converter
from agents.run_config import CallModelData, ModelInputData

from graph import FunctionSchema, ToolSchema
from openprogram import tracing
from openprogram._errors import MalformedMessage
from openprogram._runtime._session import Session
from openprogram.integrations._agents_convert import (
    ASSISTANT_SIDE,
    assistant_side,
    entry_starts,
    from_messages,
    sent_items,
    to_entries,
)
from openprogram.integrations._agents_items import StoredItems
from openprogram.integrations._agents_trace import TracedHooks, chat, model_name, traced_run
from openprogram.integrations._history import history_functions
from openprogram.integrations._mirror import Entry, Mirror, Paired

__all__ = ["OpenProgramSession", "from_messages", "to_entries"]

NAME = "openai_agents"
T = TypeVar("T")


class OpenProgramSession(SessionABC):
    """An Agents SDK session over an OpenProgram ``Session`` (see the module docstring)."""

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session: Session,
        session_id: str | None = None,
        *,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.session = session
        self.session_id = session_id or session.id
        self.session_settings = session_settings
        self.mirror = Mirror(session, NAME)
        self.mirror.warm()
        self.tools: list[Tool] = [function_tool(fn) for fn in history_functions(session)]
        self._lock = threading.RLock()
        self._stored = StoredItems(session, self.session_id)
        self._entries: list[Entry] | None = None
        """The live list's entries, kept so that an append converts only what it adds (and
        handed to every call that continues the list: the same objects, whose pairs the
        mirror keeps from one render to the next)."""
        self._starts: dict[int, int] = {}
        """Where each of those entries' items start in the live list, by the entry's id."""
        self._adds: int | None = None
        self._filtered = False
        self._warned = False
        self._configured: str | Model | None = None
        self._read_ahead()

    def _read_ahead(self) -> None:
        """Read the stored list and convert it now (the digests the mirror knows them by
        taken too), as the mirror reads its steps: the first request then converts only what
        it adds (a malformed item is left to it, named)."""
        with self._lock:
            try:
                entries = to_entries(self._live())
            except MalformedMessage:
                return
            for entry in entries:
                entry.digest  # noqa: B018 (kept on the entry)
            self._starts = entry_starts(entries, None, {})
            self._entries = entries

    # -- the three pieces, wired -------------------------------------------------------------
    def agent(self, agent: Agent[T]) -> Agent[T]:
        """``agent`` with the history tools it does not have yet."""
        names = {getattr(tool, "name", None) for tool in agent.tools}
        missing = [tool for tool in self.tools if getattr(tool, "name", None) not in names]
        return agent.clone(tools=[*agent.tools, *missing]) if missing else agent

    def run_config(self, config: RunConfig | None = None) -> RunConfig:
        """``config`` (or a default one) with this session's ``input_filter``."""
        config = config or RunConfig()
        self._configured = config.model  # the model the SDK runs, over the agent's own
        return dataclasses.replace(config, call_model_input_filter=self.input_filter)

    def hooks(self, hooks: RunHooks[Any] | None = None) -> RunHooks[Any]:
        """``hooks`` (or none) with the anchor: after each model call the input tokens the
        provider reported correct the estimate of the prompt the filter rendered for it."""
        return _Anchoring(self, hooks)

    def _anchor(self, input_tokens: int) -> None:
        last = self.mirror.last
        if input_tokens > 0 and last is not None:
            self.session.engine.anchor_usage(input_tokens, estimated=last.tokens)

    async def run(
        self, agent: Agent[Any], input: str | list[TResponseInputItem], **kwargs: Any
    ) -> RunResult:
        """``Runner.run`` with this session, its filter and its tools (``run_config=``,
        ``hooks=`` and every other argument of ``Runner.run`` pass through). With tracing
        on, the run is one trace (see ``_agents_trace``)."""
        config = self.run_config(kwargs.pop("run_config", None))
        hooks = self.hooks(kwargs.pop("hooks", None))
        with traced_run(agent, self.session.id, self.session_id):
            return await Runner.run(
                self.agent(agent), input, session=self, run_config=config, hooks=hooks, **kwargs
            )

    def run_sync(
        self, agent: Agent[Any], input: str | list[TResponseInputItem], **kwargs: Any
    ) -> RunResult:
        """``Runner.run_sync`` with this session, its filter and its tools."""
        config = self.run_config(kwargs.pop("run_config", None))
        hooks = self.hooks(kwargs.pop("hooks", None))
        with traced_run(agent, self.session.id, self.session_id):
            return Runner.run_sync(
                self.agent(agent), input, session=self, run_config=config, hooks=hooks, **kwargs
            )

    # -- the Session protocol -------------------------------------------------------------
    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        self._adds, self._filtered = 0, False
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and limit < 0:  # as SQLiteSession: 0 is none, negative all
            limit = None
        return await asyncio.to_thread(self._copied, limit)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        if self._adds is not None:  # the first write after a read is the run's input
            self._adds += 1
            unfiltered = self._adds > 1 and not self._filtered
            if unfiltered and not self._warned and _answers(items):
                self._warned = True
                warnings.warn(
                    "OpenProgramSession: a run stored the model's answer without the "
                    "session's input_filter, so nothing was compacted; use "
                    "memory.run(agent, ...) or "
                    "RunConfig(call_model_input_filter=memory.input_filter)",
                    UserWarning,
                    stacklevel=2,
                )
        await asyncio.to_thread(self._add, copy.deepcopy(items))

    async def pop_item(self) -> TResponseInputItem | None:
        return await asyncio.to_thread(self._pop)

    async def clear_session(self) -> None:
        await asyncio.to_thread(self._set, [])

    # -- the model input filter -----------------------------------------------------------
    async def input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``RunConfig.call_model_input_filter``: the call's items and instructions,
        rendered under the session's budget."""
        self._filtered = True
        items = list(data.model_data.input)
        tools = [
            _schema(t) for t in getattr(data.agent, "tools", ()) if isinstance(t, FunctionTool)
        ]
        system = data.model_data.instructions
        name = model_name(data.agent, self._configured)
        with tracing.under(chat(data.agent, self._configured, name)):
            paired, starts = await asyncio.to_thread(self._render, items, tools, system, name)
        shown: list[str] = []
        sent = sent_items(paired, items, starts, shown)
        instructions = "\n\n".join(shown)
        if instructions != (system or ""):
            system = instructions or None
        return ModelInputData(input=sent, instructions=system)

    def _render(
        self,
        items: list[TResponseInputItem],
        tools: list[ToolSchema],
        system: str | None,
        model: str | None,
    ) -> tuple[list[Paired], dict[int, int]]:
        """The call rendered, and where the live list's entries it used start in ``items``
        (empty when it used entries of its own)."""
        with self._lock:
            entries, starts = self._entries_of(items)
            paired = self.mirror.render(
                entries, tools, system, conversation=self.session_id, model=model
            )
            return paired, starts

    def _entries_of(self, items: list[TResponseInputItem]) -> tuple[list[Entry], dict[int, int]]:
        """A call's entries: the live list's for the items that start with it (the same
        objects: they show items equal to the call's, at the places ``starts`` gives)."""
        entries, keys = self._entries, self._stored.keys()
        if entries is None or len(items) < len(keys):
            return to_entries(items), {}
        count = len(keys)
        joined = 0 < count < len(items) and assistant_side(items[count - 1])
        if (joined and assistant_side(items[count])) or items[:count] != self._live():
            return to_entries(items), {}  # (joined: the rest continues the live list's turn)
        return [*entries, *to_entries(items[count:], start=count)], self._starts

    # -- stored items ---------------------------------------------------------------------
    def _live(self) -> list[TResponseInputItem]:
        with self._lock:
            return self._stored.live()

    def _copied(self, limit: int | None) -> list[TResponseInputItem]:
        with self._lock:
            return self._stored.copied(limit)

    def _add(self, items: list[TResponseInputItem]) -> None:
        """Append ``items``: only they are keyed and converted (with the live list's last
        run of assistant-side items, when they continue it: one turn, one message)."""
        with self._lock:
            live = self._live()
            entries, keys = self._entries, self._stored.keys()
            if entries is None:
                self._set([*live, *items])
                return
            start = len(live)
            if live and items and assistant_side(live[-1]) and assistant_side(items[0]):
                while start > 0 and assistant_side(live[start - 1]):
                    start -= 1  # the run's start: what comes before it converts alone
                starts = self._starts
                entries = [e for e in entries if starts[id(e)] < start]
            self._set(
                [*live, *items],
                keys=[*keys, *(_item_key(item) for item in items)],
                entries=[*entries, *to_entries([*live[start:], *items], start=start)],
                added=len(live),
            )

    def _pop(self) -> TResponseInputItem | None:
        with self._lock:
            live = self._live()
            if not live:
                return None
            self._set(live[:-1])
            return copy.deepcopy(live[-1])

    def _set(
        self,
        items: list[TResponseInputItem],
        *,
        keys: list[str] | None = None,
        entries: list[Entry] | None = None,
        added: int = 0,
    ) -> None:
        """Make ``items`` the session's list: new ones stored, then the list (as a chunk
        when it extends the stored one), then the graph moved to match, all in one
        transaction (``keys`` and ``entries``: the items' own, when the caller has them;
        ``added``: where the items not stored yet may begin)."""
        with self._lock:
            if entries is None:  # a malformed item is refused before anything is stored
                entries = to_entries(items)
            if keys is None:
                keys = [_item_key(item) for item in items]
            known = self._stored.items
            pairs = zip(keys[added:], items[added:], strict=True)
            new = {k: i for k, i in pairs if k not in known}
            try:
                with self.mirror.writing():
                    self._stored.write(keys, new)
                    self.mirror.sync(entries)
            except BaseException:
                self._stored.forget()
                self._entries, self._starts = None, {}
                raise
            self._stored.written()
            self._starts = entry_starts(entries, self._entries, self._starts)
            self._entries = entries


class _Anchoring(TracedHooks):
    """A run's hooks, passed on (and traced, inside a traced run), plus the session's anchor
    on each model call's usage."""

    def __init__(self, memory: OpenProgramSession, inner: RunHooks[Any] | None) -> None:
        super().__init__(inner)
        self.memory = memory

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        if response.usage.input_tokens > 0:  # (a model that reports none: nothing to anchor)
            await asyncio.to_thread(self.memory._anchor, response.usage.input_tokens)
        await super().on_llm_end(context, agent, response)


def _answers(items: Sequence[Any]) -> bool:
    """Whether ``items`` hold a model's answer (what the SDK stores after a model call)."""
    return any(
        isinstance(i, dict) and (i.get("type") in ASSISTANT_SIDE or i.get("role") == "assistant")
        for i in items
    )


def _schema(tool: FunctionTool) -> ToolSchema:
    """The tool as the SDK's chat-completions models send it (its own ``tool_to_openai``:
    ``strict`` and all), counted in the budget as sent."""
    try:
        return cast("ToolSchema", dict(Converter.tool_to_openai(tool)))
    except UserError:  # a Responses-only tool: described as it would be, were it sent
        function: FunctionSchema = {
            "name": tool.name,
            "description": tool.description or "",
            "parameters": tool.params_json_schema,
            "strict": tool.strict_json_schema,
        }
        return {"type": "function", "function": function}


def _item_key(item: Any) -> str:
    text = json.dumps(item, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()
