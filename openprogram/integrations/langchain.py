"""OpenProgram as a LangChain v1 agent middleware: each model call gets the compacted history.

    agent = create_agent(model, tools, middleware=[OpenProgramMiddleware(Session("agent.db"))])

The middleware overrides the model call (``wrap_model_call`` and ``awrap_model_call``) and
changes only the request it passes on: the agent state's ``messages`` stay whole, unlike
``SummarizationMiddleware``, which replaces them with a summary. Every message is stored in
the session's graph (tool calls and their ``ToolMessage`` results as tool nodes, message ids
in meta), and the call goes out with the session's render — the state's own message objects
for what compaction left alone, new ones for summaries, notes and cleared outputs, which the
model can read back with the history tools this middleware registers (a model that cannot
bind tools gets none). The system message (``system_prompt``) is stored as the session's
system message, again where it changes, and counted in the budget; it travels in its own
field, as ``create_agent`` sends it. Each thread (``configurable.thread_id``) is a session
of its own (see ``Conversations``); ``middleware.session`` is the first thread's, and
``middleware.sessions`` all of them: layers, rollback and records. Needs
``pip install 'openprogram[langchain]'``.

With tracing on (when the middleware is built: off, the agent has no hook nodes for it),
each agent invocation is one ``invoke_agent`` span (opened in ``before_agent``, closed in
``after_agent``: LangChain has no OpenTelemetry of its own) with
a ``chat`` span per model call and its ``render_context`` beside it; the conversation id is
the LangGraph thread id when the run has one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.runtime import Runtime

from graph import ToolSchema
from openprogram import tracing
from openprogram._runtime._session import Session
from openprogram.integrations._history import history_functions
from openprogram.integrations._kept import KeptEntries, frozen
from openprogram.integrations._langchain_messages import (
    NAME,
    Outgoing,
    entries_of,
    from_messages,
    snapshot,
    to_entries,
)
from openprogram.integrations._mirror import Entry, Mirror
from openprogram.integrations._threads import Conversations

__all__ = ["OpenProgramMiddleware", "from_messages", "history_tools", "to_entries"]

Handler = Callable[[ModelRequest[Any]], ModelResponse[Any]]
AsyncHandler = Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
Answer = ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]


class OpenProgramMiddleware(AgentMiddleware[Any, Any, Any]):
    """Stores a ``create_agent`` agent's messages in ``session`` (each other thread in a
    session of its own) and sends each model call the session's compacted render of
    them; registers the history tools unless ``history_tools=False``. Its ``invoke_agent``
    spans are opened when tracing is on as it is built: off, its agent runs without the two
    graph nodes they take (about 0.5 ms a request)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> OpenProgramMiddleware:
        if cls is OpenProgramMiddleware and not tracing.enabled():
            cls = _Untraced
        return super().__new__(cls)

    @property
    def name(self) -> str:
        return "OpenProgramMiddleware"

    def __init__(self, session: Session, *, history_tools: bool = True) -> None:
        super().__init__()
        self.session = session
        self.conversations = Conversations(session, NAME)
        self.mirror = self.conversations.mirror
        self._kept = KeptEntries(entries_of, snapshot=snapshot)
        self._outgoing: dict[str, Outgoing] = {}
        """What the last call of each thread sent."""
        self.tools: Sequence[BaseTool] = _tools(session) if history_tools else []
        self._schemas = _Schemas()
        self._schemas.of(self.tools)  # converted here, ahead of the first request
        self._agents: dict[str, Any] = {}
        """The open ``invoke_agent`` span of each LangGraph thread ("" for none)."""

    @property
    def sessions(self) -> dict[str, Session]:
        """The session of each thread seen so far."""
        return self.conversations.sessions

    # -- one span per agent invocation --------------------------------------------------
    def before_agent(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        if not tracing.enabled():
            return None
        thread = _thread(runtime)
        tracing.end(self._agents.pop(thread, None), _Unfinished("the next invocation began"))
        session = self.conversations.mirror_for(thread or None).session

        def attributes() -> dict[str, Any]:
            g = tracing.semconv()
            return {
                **tracing.conversation_attributes(session.id, thread or None),
                g.GEN_AI_OPERATION_NAME: g.GenAiOperationNameValues.INVOKE_AGENT.value,
            }

        self._agents[thread] = tracing.start("invoke_agent", None, attributes)
        return None

    def after_agent(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        tracing.end(self._agents.pop(_thread(runtime), None))
        return None

    async def abefore_agent(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)

    async def aafter_agent(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.after_agent(state, runtime)

    def _agent(self, request: ModelRequest[Any]) -> Any:
        return self._agents.get(_thread(request.runtime)) if self._agents else None

    # -- model calls --------------------------------------------------------------------
    def wrap_model_call(self, request: ModelRequest[Any], handler: Handler) -> Answer:
        mirror, model = self._mirror(request), _named_model(request.model)
        with tracing.under(self._agent(request)):
            ready, entries = self._request(mirror, request, model)
            with self._chat(mirror, request, model) as current:
                answer = handler(ready)
                _traced(current, answer)
        self._record(mirror, request, entries, answer)
        return answer

    async def awrap_model_call(self, request: ModelRequest[Any], handler: AsyncHandler) -> Answer:
        mirror, model = self._mirror(request), _named_model(request.model)
        with tracing.under(self._agent(request)):
            ready, entries = await asyncio.to_thread(self._request, mirror, request, model)
            with self._chat(mirror, request, model) as current:
                answer = await handler(ready)
                _traced(current, answer)
        await asyncio.to_thread(self._record, mirror, request, entries, answer)
        return answer

    def _chat(self, mirror: Mirror, request: ModelRequest[Any], named: str | None) -> Any:
        """The call's ``chat`` span (named after the model's own name, else its class)."""
        model = named or type(request.model).__name__

        def attributes() -> dict[str, Any]:
            g = tracing.semconv()
            thread = _thread(request.runtime)
            provider = _provider(request.model)
            agent = self._agent(request)
            if agent is not None and provider:
                agent.set_attribute(g.GEN_AI_PROVIDER_NAME, provider)
            return {
                **tracing.conversation_attributes(mirror.session.id, thread or None),
                g.GEN_AI_OPERATION_NAME: g.GenAiOperationNameValues.CHAT.value,
                g.GEN_AI_PROVIDER_NAME: provider or "_OTHER",
                g.GEN_AI_REQUEST_MODEL: model,
            }

        return tracing.span("chat", model, attributes)

    def _mirror(self, request: ModelRequest[Any]) -> Mirror:
        return self.conversations.mirror_for(_thread(request.runtime) or None)

    def _record(
        self, mirror: Mirror, request: ModelRequest[Any], entries: list[Entry], answer: Answer
    ) -> None:
        """Store the answer; the input tokens the provider reports correct later estimates."""
        messages = _answered(answer)
        mirror.sync([*entries, *to_entries(messages)], _system(request))
        usage = next((m.usage_metadata for m in messages if isinstance(m, AIMessage)), None)
        if usage and usage["input_tokens"] > 0 and mirror.last is not None:
            estimated = mirror.last.tokens
            mirror.session.engine.anchor_usage(usage["input_tokens"], estimated=estimated)

    def _request(
        self, mirror: Mirror, request: ModelRequest[Any], model: str | None
    ) -> tuple[ModelRequest[Any], list[Entry]]:
        """The request as it goes out, and the entries of its messages (off the event loop on
        the async path, as the render: both walk the whole history on a first request)."""
        thread = _thread(request.runtime)
        entries = self._kept.entries(request.messages, thread)
        tools = request.tools
        if not _binds_tools(request.model):  # the model could not take even ours
            ours = {tool.name for tool in self.tools}
            tools = [t for t in tools if not (isinstance(t, BaseTool) and t.name in ours)]
        schemas = self._schemas.of(tools)
        system = _system(request)
        paired = mirror.render(entries, schemas, system, conversation=thread or None, model=model)
        outgoing = self._outgoing.get(thread) or self._outgoing.setdefault(thread, Outgoing())
        instructions, messages = outgoing.messages(paired)
        message = request.system_message
        if instructions != (system or ""):
            message = SystemMessage(instructions) if instructions else None
        return request.override(messages=messages, system_message=message, tools=tools), entries


class _Untraced(OpenProgramMiddleware):
    """The middleware built while tracing is off: no ``before_agent``/``after_agent`` hooks,
    so ``create_agent`` adds no graph nodes for them."""

    before_agent = AgentMiddleware.before_agent
    after_agent = AgentMiddleware.after_agent
    abefore_agent = AgentMiddleware.abefore_agent
    aafter_agent = AgentMiddleware.aafter_agent


class _Unfinished(Exception):
    """An invocation whose ``after_agent`` never ran (it failed or was interrupted)."""


def _thread(runtime: Any) -> str:
    info = getattr(runtime, "execution_info", None)
    return str(getattr(info, "thread_id", None) or "")


def _ls_params(model: Any) -> dict[str, Any]:
    try:
        params = model._get_ls_params()
    except Exception:  # a model that is not a BaseChatModel
        return {}
    return params if isinstance(params, dict) else {}


def _provider(model: Any) -> str:
    return str(_ls_params(model).get("ls_provider") or "")


def _named_model(model: Any) -> str | None:
    """The name a chat model gives itself (``gpt-4o``), recorded in the session; None for
    one that names none (a fake model's class name is no model's)."""
    for name in (
        _ls_params(model).get("ls_model_name"),
        getattr(model, "model_name", None),
        getattr(model, "model", None),
    ):
        if isinstance(name, str) and name:
            return name
    return None


def _traced(current: Any, answer: Any) -> None:
    """The response's id, model, finish reason and usage on its ``chat`` span."""
    if current is None:
        return
    message = next((m for m in _answered(answer) if isinstance(m, AIMessage)), None)
    if message is None:
        return
    g = tracing.semconv()
    metadata = message.response_metadata or {}
    finish = metadata.get("finish_reason") or metadata.get("stop_reason")
    usage: dict[str, Any] = dict(message.usage_metadata or {})
    details = usage.get("input_token_details") or {}
    tracing.set_attributes(
        current,
        {
            g.GEN_AI_RESPONSE_ID: metadata.get("id") or message.id,
            g.GEN_AI_RESPONSE_MODEL: metadata.get("model_name") or metadata.get("model"),
            g.GEN_AI_RESPONSE_FINISH_REASONS: [str(finish)] if finish else None,
            g.GEN_AI_USAGE_INPUT_TOKENS: usage.get("input_tokens"),
            g.GEN_AI_USAGE_OUTPUT_TOKENS: usage.get("output_tokens"),
            g.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: details.get("cache_read"),
            g.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: details.get("cache_creation"),
        },
    )


def _system(request: ModelRequest[Any]) -> str | None:
    message = request.system_message
    return str(message.text) if message is not None else None


def _binds_tools(model: Any) -> bool:
    """Whether the model implements ``bind_tools`` (``BaseChatModel``'s raises)."""
    if not isinstance(model, BaseChatModel):
        return True
    return type(model).bind_tools is not BaseChatModel.bind_tools


def history_tools(session: Session) -> list[BaseTool]:
    """The history tools as LangChain tools (the middleware registers these itself)."""
    return _tools(session)


def _tools(session: Session) -> list[BaseTool]:
    return [
        StructuredTool.from_function(fn, name=fn.__name__, parse_docstring=True)
        for fn in history_functions(session)
    ]


def _schema(tool: BaseTool | dict[str, Any]) -> ToolSchema | None:
    """A tool's schema, counted in the budget (a provider tool it cannot describe is not)."""
    try:
        return cast("ToolSchema", convert_to_openai_tool(tool))
    except (ValueError, TypeError, NotImplementedError):
        return None


class _Schemas:
    """The tools' schemas, a tool's converted again only when what LangChain builds it from
    changed: its class, name, description and argument schema (what LangChain keys its own
    memo of the schema on) and its metadata (a custom tool's format)."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[BaseTool, Any, ToolSchema | None]] = {}

    def of(self, tools: Sequence[BaseTool | dict[str, Any]]) -> list[ToolSchema]:
        kept, now = self._kept, {}
        schemas = []
        for tool in tools:
            if not isinstance(tool, BaseTool):  # a provider's tool, as a dict
                schema = _schema(tool)
            else:
                found = kept.get(id(tool))
                if found is None or found[0] is not tool or found[1] != _made_from(tool):
                    try:
                        made_from = frozen(_made_from(tool))
                    except Exception:  # a value that cannot be copied: converted each time
                        made_from = None
                    found = (tool, made_from, _schema(tool))
                now[id(tool)] = found
                schema = found[2]
            if schema:
                schemas.append(schema)
        self._kept = now  # (replaced whole: a concurrent call reads either)
        return schemas


def _made_from(tool: BaseTool) -> tuple[Any, ...]:
    return (type(tool), tool.name, tool.description, tool.args_schema, tool.metadata)


def _answered(answer: Any) -> list[BaseMessage]:
    if isinstance(answer, ExtendedModelResponse):
        answer = answer.model_response
    if isinstance(answer, ModelResponse):
        return list(answer.result)
    return [answer] if isinstance(answer, BaseMessage) else []
