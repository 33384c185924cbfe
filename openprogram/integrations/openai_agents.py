"""OpenProgram as an OpenAI Agents SDK ``Session``, with the filter that compacts each call.

    memory = OpenProgramSession(Session("agent.db"))
    run_config = RunConfig(call_model_input_filter=memory.input_filter)
    agent = Agent("helper", tools=[*memory.tools], model=...)
    await Runner.run(agent, "…", session=memory, run_config=run_config)

The session stores the exact items the SDK writes and returns exactly those: the SDK reads
``get_items`` back to check and rewind its own writes by comparing digests, so it must
never see our compacted copy there. ``pop_item`` is a head move (the item stays stored, and
the graph forks back), ``clear_session`` starts a new branch; nothing is ever deleted.
Every item is also a graph node (``function_call`` and its ``function_call_output`` a tool
node, the SDK's ids in meta), and the compacted rendering goes in through
``RunConfig.call_model_input_filter``: ``input_filter`` returns the SDK's own items for
what compaction left alone and new items for summaries, notes and cleared outputs. An item
the SDK adds while a render runs waits for it and is stored whole. ``memory.tools`` are the
history tools as SDK function tools; ``memory.session`` gives layers, rollback and records.
Needs ``pip install 'openprogram[openai-agents]'``.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import threading
from collections.abc import Sequence
from typing import Any

from agents import FunctionTool, function_tool
from agents.items import TResponseInputItem
from agents.memory import SessionSettings
from agents.memory.session_settings import resolve_session_limit
from agents.run_config import CallModelData, ModelInputData

from openprogram._session import Session
from openprogram.integrations._history import history_functions
from openprogram.integrations._mirror import Entry, Mirror, Paired

__all__ = ["OpenProgramSession", "from_messages", "to_entries"]

NAME = "openai_agents"
ITEMS = "openai_agents.items"
"""Store side-data namespace: every item the SDK wrote, by the sha256 of its JSON."""
LIVE = "openai_agents.live"
"""Store side-data namespace: the session's current item list (keys into ``ITEMS``)."""


class OpenProgramSession:
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
        self.tools: list[FunctionTool] = [function_tool(fn) for fn in history_functions(session)]
        self._lock = threading.RLock()
        self._keys: list[str] | None = None
        self._items: dict[str, TResponseInputItem] = {}

    # -- the Session protocol -------------------------------------------------------------
    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        items = await asyncio.to_thread(self._live)
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and limit >= 0:  # as SQLiteSession: 0 is none, negative all
            items = items[-limit:] if limit > 0 else []
        return copy.deepcopy(items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        await asyncio.to_thread(self._add, copy.deepcopy(items))

    async def pop_item(self) -> TResponseInputItem | None:
        return await asyncio.to_thread(self._pop)

    async def clear_session(self) -> None:
        await asyncio.to_thread(self._set, [])

    # -- the model input filter -----------------------------------------------------------
    async def input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``RunConfig.call_model_input_filter``: the call's items, rendered under the
        session's budget (instructions unchanged)."""
        items = list(data.model_data.input)
        tools = [
            _schema(t) for t in getattr(data.agent, "tools", ()) if isinstance(t, FunctionTool)
        ]
        rendered = await asyncio.to_thread(self._render, items, tools)
        return ModelInputData(input=rendered, instructions=data.model_data.instructions)

    def _render(
        self, items: list[TResponseInputItem], tools: list[dict[str, Any]]
    ) -> list[TResponseInputItem]:
        entries = to_entries(items)
        with self._lock:
            rendered = self.mirror.render(entries, tools, conversation=self.session_id)
            return from_messages(rendered)

    # -- stored items ---------------------------------------------------------------------
    def _live(self) -> list[TResponseInputItem]:
        with self._lock:
            store, session = self.session.store, self.session.id
            if self._keys is None:
                stored = store.get_values(session, LIVE, [self.session_id])
                self._keys = json.loads(stored[self.session_id]) if stored else []
            missing = [k for k in self._keys if k not in self._items]
            if missing:
                for key, text in store.get_values(session, ITEMS, missing).items():
                    self._items[key] = json.loads(text)
            return [self._items[key] for key in self._keys]

    def _add(self, items: list[TResponseInputItem]) -> None:
        with self._lock:
            self._set([*self._live(), *items])

    def _pop(self) -> TResponseInputItem | None:
        with self._lock:
            live = self._live()
            if not live:
                return None
            self._set(live[:-1])
            return copy.deepcopy(live[-1])

    def _set(self, items: list[TResponseInputItem]) -> None:
        """Make ``items`` the session's list: new ones stored first (never lost), then the
        list, then the graph moved to match."""
        with self._lock:
            store, session = self.session.store, self.session.id
            keys = [_item_key(item) for item in items]
            new = {k: i for k, i in zip(keys, items, strict=True) if k not in self._items}
            if new:
                # A redacting session stores items redacted too; this process keeps the
                # exact ones the SDK wrote (another process reads them redacted).
                redactor = self.session.graph.redactor
                store.put_values(
                    session,
                    ITEMS,
                    {k: json.dumps(redactor.value(i) if redactor else i) for k, i in new.items()},
                )
                self._items.update((k, json.loads(json.dumps(i))) for k, i in new.items())
            store.put_values(session, LIVE, {self.session_id: json.dumps(keys)})
            self._keys = keys
            self.mirror.sync(to_entries(items))


def _schema(tool: FunctionTool) -> dict[str, Any]:
    function = {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.params_json_schema,
    }
    return {"type": "function", "function": function}


def _item_key(item: Any) -> str:
    text = json.dumps(item, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# -- items -> chat messages ---------------------------------------------------------------
def to_entries(items: Sequence[TResponseInputItem]) -> list[Entry]:
    """Each item as an :class:`Entry` (``original``: the item itself)."""
    return [Entry(_message(item), item, _meta(item)) for item in items]


def _meta(item: Any) -> dict[str, Any]:
    ids = {key: item[key] for key in ("id", "type", "call_id") if key in item}
    provider = item.get("provider_data")
    meta: dict[str, Any] = {NAME: ids}
    if isinstance(provider, dict) and provider.get("model"):
        meta["model"] = provider["model"]
    return meta


def _message(item: Any) -> dict[str, Any]:
    kind = item.get("type")
    if kind == "function_call":
        call = {"name": item["name"], "arguments": item.get("arguments") or "{}"}
        tool_call = {"id": item["call_id"], "type": "function", "function": call}
        return {"role": "assistant", "content": None, "tool_calls": [tool_call]}
    if kind == "function_call_output":
        return {"role": "tool", "tool_call_id": item["call_id"], "content": _text(item["output"])}
    if kind == "reasoning":
        summary = [s.get("text", "") for s in item.get("summary") or () if isinstance(s, dict)]
        return {"role": "assistant", "content": None, "thinking": "\n".join(summary) or None}
    role = item.get("role")
    if role in ("user", "system", "developer", "assistant") and "content" in item:
        chat_role = "system" if role == "developer" else role
        return {"role": chat_role, "content": _text(item["content"])}
    # Another kind (a hosted tool's call or output, a handoff): named, sent back as it is.
    by = "user" if str(kind).endswith("_output") else "assistant"
    return {"role": by, "content": f"[{kind or 'item'}]"}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    texts = []
    for part in content or ():
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part, dict):
            texts.append(f"[{part.get('type')}]")
    return "\n".join(texts)


# -- rendered chat messages -> items ------------------------------------------------------
def from_messages(paired: Sequence[Paired]) -> list[TResponseInputItem]:
    """The items a call goes out with: the SDK's own for what compaction left alone, new
    ones for the rest."""
    items: list[Any] = []
    for item in paired:
        if item.entry is not None and isinstance(item.entry.original, dict):
            items.append(item.entry.original)
            continue
        message = item.message
        content = message.get("content")
        text = content if isinstance(content, str) else _text(content)
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            items.append({"type": "function_call_output", "call_id": call_id, "output": text})
            continue
        if text or role != "assistant":
            items.append({"role": role, "content": text})
        for call in message.get("tool_calls") or ():
            function = call["function"]
            items.append(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": function["name"],
                    "arguments": function.get("arguments") or "{}",
                }
            )
    return items
