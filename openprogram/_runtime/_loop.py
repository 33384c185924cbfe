"""The LLM loop: render the frame's context, call the model, run the tools it asks for,
until it answers.

Each step renders from the current frame through the session's ``ContextEngine``, so the
call sees its function's own chain and its callers as the cascade shows them. A context
overflow from the provider goes to ``engine.recover`` (tier 5) for a harder render and the
step is retried; the engine gives up with ``ContextOverflowError``. The provider's usage
anchors the token count and is stored with the assistant's node.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import re
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import Token
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from context import ProviderUsage, Rendered, is_context_overflow, provider_request_options
from graph import ChatMessage, Frame, Node
from openprogram._errors import ModelError, OutputValidationError, StepLimitExceeded
from openprogram._runtime._current import FRAME, MODEL, SESSION, TOOL_NODE
from openprogram._runtime._host import SessionHost
from openprogram._runtime._models import Model, ModelResponse
from openprogram._runtime._tools import ToolSpec, arun_tool, as_spec, run_tool
from openprogram.tracing import (
    conversation_attributes,
    provider_name,
    response_attributes,
    semconv,
    set_attributes,
    span,
    traced_render,
)

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)
_REPAIR = (
    "Your reply did not match the required output: {errors}. Reply again with only a JSON "
    "value matching this schema: {schema}"
)


@dataclass(frozen=True, slots=True)
class _Complete:
    """The loop needs the model's answer to these messages."""

    messages: list[ChatMessage]
    options: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Tools:
    """The loop needs these tool calls run: (name, arguments, tool node) each."""

    calls: list[tuple[str, str, Node]]


_Steps = Generator[_Complete | _Tools, Any, Any]


def _resume(
    steps: _Steps, result: Any = None, error: Exception | None = None
) -> tuple[_Complete | _Tools | None, Any]:
    """Send the loop what it needed (or throw the error in): its next need, or (None, its
    answer) once it returns."""
    try:
        return (steps.throw(error) if error is not None else steps.send(result)), None
    except StopIteration as stop:
        return None, stop.value


class Call:
    """One ``llm()`` call: its frame, tools, output type and model."""

    def __init__(
        self,
        session: SessionHost,
        frame: Frame,
        *,
        tools: Sequence[ToolSpec | Callable[..., Any]],
        output_type: Any,
        model: Model | None,
        max_steps: int,
        history_tools: bool,
    ) -> None:
        self.session = session
        self.frame = frame
        specs = [as_spec(t) for t in tools]
        if history_tools:
            names = {t.name for t in specs}
            specs += [s for s in session.history.specs() if s.name not in names]
        self.tools: dict[str, ToolSpec] = {spec.name: spec for spec in specs}
        self.schemas = [spec.schema() for spec in specs]
        self.output_type = output_type
        self.adapter = None if output_type is str else TypeAdapter(output_type)
        chosen = MODEL.get() or model or session.model
        if chosen is None:
            raise ModelError(
                "no model: pass model= to Session or llm(), or use openprogram.testing.override"
            )
        self.model: Model = chosen
        self.max_steps = max_steps
        self.repaired = False
        self.rendered_head: str | None = None

    # -- shared steps -------------------------------------------------------------------
    def _render(self) -> Rendered:
        engine = self.session.engine
        engine.set_tools(self.schemas)
        self.rendered_head = self.session.graph.head_of(self.frame)
        head, frame = self.rendered_head, self.frame.function
        rendered: Rendered = traced_render(
            lambda: engine.render(head=head, frame=frame), self.session.id
        )
        return rendered

    def _chat(self) -> Any:
        """The span of one model call (``chat {model}``)."""

        def attributes() -> dict[str, Any]:
            g = semconv()
            return {
                **conversation_attributes(self.session.id),
                g.GEN_AI_OPERATION_NAME: g.GenAiOperationNameValues.CHAT.value,
                g.GEN_AI_PROVIDER_NAME: provider_name(self.model),
                g.GEN_AI_REQUEST_MODEL: self.model.name,
            }

        return span("chat", self.model.name, attributes)

    def _traced(self, current: Any, response: ModelResponse) -> None:
        if current is not None:
            set_attributes(current, response_attributes(response))

    def _tool_span(self, name: str, tool: Node) -> Any:
        def attributes() -> dict[str, Any]:
            g = semconv()
            return {
                **conversation_attributes(self.session.id),
                g.GEN_AI_OPERATION_NAME: g.GenAiOperationNameValues.EXECUTE_TOOL.value,
                g.GEN_AI_TOOL_NAME: name,
                g.GEN_AI_TOOL_TYPE: "function",
                g.GEN_AI_TOOL_CALL_ID: tool.payload.call_id,  # type: ignore[union-attr]
                "openprogram.node.id": tool.id,
            }

        return span("execute_tool", name, attributes)

    def _options(self, rendered: Rendered) -> dict[str, Any]:
        """The request's options (the render's commit left its receipt)."""
        options: dict[str, Any] = {}
        if rendered.context_management:
            options["context_management"] = rendered.context_management
            options["extra_headers"] = {"anthropic-beta": "context-management-2025-06-27"}
        engine = self.session.engine
        options.update(
            provider_request_options(engine.policy, engine.budget, rendered.context_management)
        )
        if self.adapter is not None:
            options["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": self.adapter.json_schema()},
            }
        return options

    def _recover(self, error: Exception) -> Rendered:
        if isinstance(error, AssertionError):
            raise error  # a test's fake model ran out or failed a check: not a provider error
        if not is_context_overflow(error):
            raise ModelError(f"model {self.model.name} failed: {error}") from error
        head = self.rendered_head = self.session.graph.head_of(self.frame)
        engine, frame = self.session.engine, self.frame.function
        rendered: Rendered = traced_render(
            lambda: engine.recover(error, head=head, frame=frame), self.session.id, recovery=True
        )
        return rendered

    def _keep_usage(self, rendered: Rendered, response: ModelResponse) -> None:
        """The provider's usage on the receipt of the prompt it answered."""
        usage, storage = response.usage, self.session.engine.storage
        if not rendered.id or storage is None or usage.input_tokens <= 0:
            return
        reported = ProviderUsage(
            input_tokens=usage.input_tokens,
            cached_input_tokens=usage.cached_tokens,
            cache_write_tokens=usage.cache_written,
            output_tokens=usage.output_tokens,
        )
        storage.put_usage(rendered.id, reported)

    def _record(self, response: ModelResponse) -> tuple[Node, list[tuple[str, str, Node]]]:
        engine = self.session.engine
        usage = response.usage
        if usage.input_tokens > 0:
            engine.anchor_usage(usage.input_tokens)
        else:
            engine.note_success()
        meta: dict[str, Any] = {
            "model": response.model or self.model.name,
            "usage": {
                "input": max(0, usage.input_tokens - usage.cached_tokens - usage.cache_written),
                "cache_read": usage.cached_tokens,
                "cache_creation": usage.cache_written,
                "output": usage.output_tokens,
                "cost": usage.cost,
            },
        }
        if response.provider_items:
            meta["provider_items"] = response.provider_items
            policy = engine.policy
            if policy.provider_compaction != "off":
                engine.provider_compaction(
                    response.provider_items,
                    head=self.rendered_head,
                    frame=self.frame.function,
                    provider=policy.provider_compaction,
                )
        node = self.session.graph.append(response.message, frame=self.frame, meta=meta)
        calls = []
        by_call = {t.payload.call_id: t for t in self.session.graph.tools(node.id)}  # type: ignore[union-attr]
        for call in response.message.get("tool_calls") or ():
            function = call.get("function", {})
            calls.append(
                (
                    str(function.get("name")),
                    str(function.get("arguments") or "{}"),
                    by_call[call["id"]],
                )
            )
        return node, calls

    def _answer(self, tool: Node, text: str, error: bool) -> None:
        call_id = tool.payload.call_id  # type: ignore[union-attr]
        message: ChatMessage = {"role": "tool", "tool_call_id": call_id, "content": text}
        if error:
            message["is_error"] = True
        self.session.graph.append(message, frame=self.frame)

    def _final(self, message: ChatMessage) -> tuple[bool, Any]:
        """(done, value): the answer, or not done when a repair turn was asked for."""
        text = message.get("content") or ""
        if not isinstance(text, str):
            text = json.dumps(text)
        if self.adapter is None:
            return True, text
        stripped = text.strip()
        fenced = _FENCE.match(stripped)
        try:
            return True, self.adapter.validate_json(fenced.group(1) if fenced else stripped)
        except ValidationError as error:
            if self.repaired:
                raise OutputValidationError(
                    f"the model's answer does not match {self.output_type!r} after a repair "
                    f"turn: {error.errors()[0]['msg']}"
                ) from error
            self.repaired = True
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}"
                for e in error.errors()[:5]
            )
            schema = json.dumps(self.adapter.json_schema())
            repair = _REPAIR.format(errors=problems, schema=schema)
            self.session.graph.append({"role": "user", "content": repair}, frame=self.frame)
            return False, None

    def _unknown(self, name: str) -> str:
        return f"Error: no tool named {name!r}; available: {', '.join(self.tools) or 'none'}"

    def _limit(self) -> StepLimitExceeded:
        where = "the top level"
        if self.frame.function is not None:
            name = self.session.graph.get(self.frame.function).payload.name
            where = f"function {name!r} (node {self.frame.function})"
        return StepLimitExceeded(
            f"llm() in {where} took {self.max_steps} model turns without a final answer; "
            "raise max_steps or give the model fewer tools to loop on"
        )

    def _bind(
        self, tool: Node
    ) -> tuple[Token[SessionHost | None], Token[Frame], Token[str | None]]:
        """Run a tool inside this call: its session and frame are bound (even when the code
        that called ``llm`` bound none), so an agentic function the tool starts goes on the
        call's chain, spawned by the tool's node."""
        return SESSION.set(self.session), FRAME.set(self.frame), TOOL_NODE.set(tool.id)

    # -- the loop, once: a generator of what it needs, driven sync or async ---------------
    def _steps(self) -> _Steps:
        """The loop itself. It yields what it needs (a model call, tool runs) and is sent
        the result, or has the model's error thrown in, so ``run`` and ``arun`` only drive it."""
        for _ in range(self.max_steps):
            rendered = self._render()
            while True:
                try:
                    with self._chat() as current:
                        response = yield _Complete(rendered.messages, self._options(rendered))
                        self._traced(current, response)
                    break
                except Exception as error:
                    rendered = self._recover(error)
            with self.session.graph.batch():  # the answer, its usage and anchor: one commit
                _, calls = self._record(response)
                self._keep_usage(rendered, response)
            if not calls:
                done, value = self._final(response.message)
                if done:
                    return value
                continue
            results = yield _Tools(calls)
            for (_, _, tool), (text, failed) in zip(calls, results, strict=True):
                self._answer(tool, text, failed)
        raise self._limit()

    def run(self) -> Any:
        steps = self._steps()
        need: _Complete | _Tools | None = next(steps)
        value = None
        while need is not None:
            try:
                if isinstance(need, _Complete):
                    result: Any = self.model.complete(need.messages, self.schemas, **need.options)
                else:
                    result = self._run_tools(need.calls)
            except Exception as error:
                need, value = _resume(steps, error=error)
            else:
                need, value = _resume(steps, result)
        return value

    def _run_tools(self, calls: list[tuple[str, str, Node]]) -> list[tuple[str, bool]]:
        def one(name: str, arguments: str, tool: Node) -> tuple[str, bool]:
            spec = self.tools.get(name)
            if spec is None:
                return self._unknown(name), True
            tokens = self._bind(tool)
            try:
                with self._tool_span(name, tool):
                    return run_tool(spec, arguments)
            finally:
                TOOL_NODE.reset(tokens[2])
                FRAME.reset(tokens[1])
                SESSION.reset(tokens[0])

        if len(calls) == 1:
            return [one(*calls[0])]
        with ThreadPoolExecutor(min(8, len(calls)), thread_name_prefix="openprogram-tool") as pool:
            futures = [
                pool.submit(contextvars.copy_context().run, one, name, arguments, tool)
                for name, arguments, tool in calls
            ]
            return [future.result() for future in futures]

    async def arun(self) -> Any:
        """:meth:`run` for async code: the same loop, with async tools run concurrently."""
        steps = self._steps()
        need: _Complete | _Tools | None = next(steps)
        value = None
        while need is not None:
            try:
                if isinstance(need, _Complete):
                    result: Any = await self.model.acomplete(
                        need.messages, self.schemas, **need.options
                    )
                else:
                    result = await asyncio.gather(*(self._arun_tool(*c) for c in need.calls))
            except Exception as error:
                need, value = _resume(steps, error=error)
            else:
                need, value = _resume(steps, result)
        return value

    async def _arun_tool(self, name: str, arguments: str, tool: Node) -> tuple[str, bool]:
        spec = self.tools.get(name)
        if spec is None:
            return self._unknown(name), True
        self._bind(tool)  # this task's own context: siblings keep theirs
        with self._tool_span(name, tool):
            return await arun_tool(spec, arguments)
