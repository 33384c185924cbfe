"""The strongest library peers, run through their own code beside our policies.

- ``harness``: pydantic-ai-harness's zero-LLM ``TieredCompaction`` (target: the budget) over
  ``ClampOversizedMessages`` (a quarter of the budget per part), ``DeduplicateFileReads``,
  ``ClearToolResults(keep_pairs=3)`` and ``SlidingWindowCompaction`` (keeping half the
  budget). Its edits persist into the run history (``RunContext.messages``), so it is replayed
  statefully: each turn's new messages are appended to the history it left, and each response
  carries the usage a provider would have reported for the prompt the harness sent, which
  is what its token estimate anchors on in a real run.
- ``langchain-clear``: LangChain v1's ``ContextEditingMiddleware(ClearToolUsesEdit)`` (trigger:
  the budget, keep 3), called through ``wrap_model_call`` on the whole history each turn, as
  the middleware runs in an agent (its edits are per request and do not persist);
  ``langchain-clear-trim`` then applies ``trim_messages`` like the ``trim`` baseline.

Both count tokens with the bench's own tokenizer where the library takes one: the harness
estimates text with it (besides anchoring on the reported usage), which is its strongest
configuration (its default four-characters-per-token guess left 6 of the 13 shared traces over
budget at 32k, the tokenizer 2), and LangChain's trigger counts messages with it. Both need
the ``openprogram[bench]`` extra, imported only here.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

from context import read_target
from openprogram._errors import BaselineUnavailable
from openprogram.bench._baselines import from_langchain, to_langchain, trim_baseline
from openprogram.bench._metrics import CountMessage, Message
from openprogram.bench._pydantic_ai import from_pydantic_ai, merge_requests, to_pydantic_ai

PEERS = ("harness", "langchain-clear", "langchain-clear-trim")


def _harness() -> tuple[Any, Any, Any, Any]:
    try:
        import pydantic_ai_harness.compaction as compaction
        from pydantic_ai.models import ModelRequestContext, ModelRequestParameters
        from pydantic_ai.models.test import TestModel
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise BaselineUnavailable(
            "the harness baseline needs pydantic-ai-harness: pip install 'openprogram[bench]'"
        ) from exc
    return compaction, ModelRequestContext, ModelRequestParameters, TestModel


def file_key(call: Any) -> str | None:
    """``DeduplicateFileReads``'s key for a tool call: the file and the lines it read, so only
    a read of the same range supersedes another (a wrong guess would drop live data)."""
    try:
        arguments = call.args_as_dict()
    except ValueError:
        return None
    target = read_target(call.tool_name, arguments)
    return None if target is None else json.dumps(list(target))


class HarnessReplay:
    """pydantic-ai-harness's tiered compaction, replayed turn by turn as in a live run."""

    def __init__(
        self, budget: int, count: CountMessage, text_counter: Callable[[str], int]
    ) -> None:
        compaction, self._request_context, self._parameters, test_model = _harness()
        from pydantic_ai.tools import RunContext
        from pydantic_ai.usage import RunUsage

        self.count = count
        tokens = functools.lru_cache(maxsize=1 << 16)(text_counter)
        self.strategy = compaction.TieredCompaction(
            tiers=[
                compaction.ClampOversizedMessages(max_part_tokens=budget // 4, tokenizer=tokens),
                compaction.DeduplicateFileReads(file_key=file_key, tokenizer=tokens),
                compaction.ClearToolResults(max_tokens=budget, keep_pairs=3, tokenizer=tokens),
                compaction.SlidingWindowCompaction(
                    max_tokens=budget, keep_tokens=budget // 2, tokenizer=tokens
                ),
            ],
            target_tokens=budget,
            tokenizer=tokens,
        )
        self.model = test_model()
        self.ctx = RunContext(deps=None, model=self.model, usage=RunUsage(), messages=[])
        self._loop = asyncio.new_event_loop()
        self._appended = 0
        self._names: dict[str, str] = {}
        self._usage: dict[int, tuple[int, int]] = {}
        self._back: dict[int, tuple[Any, list[Message]]] = {}
        self._opening = True  # only system prompts so far: they join the first user prompt

    def render(self, history: Sequence[Message]) -> list[Message]:
        """The prompt the harness sends after ``history`` (its edits persist)."""
        while self._appended < len(history):
            message = history[self._appended]
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                self._names[str(call.get("id") or "")] = str(function.get("name") or "")
            sent, answered = self._usage.get(self._appended, (None, None))
            converted = to_pydantic_ai(
                message, self._names, input_tokens=sent, output_tokens=answered
            )
            originals = [message]
            if self._opening and self.ctx.messages and message.get("role") != "assistant":
                first = self.ctx.messages.pop()
                originals = [*self._messages(first), message]
                converted = merge_requests(first, converted)
            self._opening = self._opening and message.get("role") in ("system", "developer")
            self._back[id(converted)] = (converted, originals)
            self.ctx.messages.append(converted)
            self._appended += 1
        request = self._request_context(
            model=self.model,
            messages=list(self.ctx.messages),
            model_settings=None,
            model_request_parameters=self._parameters(),
        )
        result = self._loop.run_until_complete(
            self.strategy.before_model_request(self.ctx, request)
        )
        return [m for message in result.messages for m in self._messages(message)]

    def _messages(self, message: Any) -> list[Message]:
        """The OpenAI dicts for a harness message: the trace's own while it is unedited
        (same objects, so counts and prefix checks stay cheap), else converted ones."""
        known = self._back.get(id(message))
        if known is None or known[0] is not message:
            known = (message, from_pydantic_ai(message))
            self._back[id(message)] = known
        return known[1]

    def answered(self, position: int, prompt_tokens: int, answer: Message) -> None:
        """The response at ``position`` was produced from a prompt of ``prompt_tokens``: the
        usage it will carry when it joins the history."""
        self._usage[position] = (prompt_tokens, self.count(answer))

    def close(self) -> None:
        self._loop.close()


def _langchain() -> tuple[Any, Any, Any]:
    try:
        from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
        from langchain.agents.middleware.types import ModelRequest
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise BaselineUnavailable(
            "the langchain-clear baseline needs langchain: pip install 'openprogram[bench]'"
        ) from exc
    return ClearToolUsesEdit, ContextEditingMiddleware, ModelRequest


class LangChainClear:
    """LangChain v1's ``ContextEditingMiddleware(ClearToolUsesEdit)``, optionally followed by
    ``trim_messages``, called through the middleware's own ``wrap_model_call``."""

    def __init__(self, budget: int, count: CountMessage, *, trim: bool = False) -> None:
        clear_edit, middleware, self._request = _langchain()
        from langchain_core.language_models.fake_chat_models import FakeListChatModel

        self.budget, self.count, self.trim = budget, count, trim
        self._system_tokens = 0
        self.middleware = middleware(
            edits=[clear_edit(trigger=budget, keep=3)], token_counter=self._count
        )
        self.model = FakeListChatModel(responses=[""])
        self._converted: dict[int, tuple[Message, Any]] = {}

    def _count(self, messages: Sequence[Any]) -> int:
        return self._system_tokens + sum(self.count(from_langchain(m)) for m in messages)

    def _lc(self, message: Message) -> Any:
        known = self._converted.get(id(message))
        if known is None or known[0] is not message:
            known = self._converted[id(message)] = (message, to_langchain(message))
        return known[1]

    def render(self, history: Sequence[Message]) -> list[Message]:
        """The prompt the middleware sends for ``history`` (then trimmed, for the trim peer)."""
        systems = [m for m in history if m.get("role") in ("system", "developer")]
        rest = [m for m in history if m.get("role") not in ("system", "developer")]
        self._system_tokens = sum(self.count(m) for m in systems)
        system = self._lc(systems[0]) if len(systems) == 1 else None
        if system is None:
            rest, systems = list(history), []
        seen: list[Any] = []

        def handler(request: Any) -> Any:
            seen.extend(request.messages)
            return None

        request = self._request(
            model=self.model, messages=[self._lc(m) for m in rest], system_message=system
        )
        self.middleware.wrap_model_call(request, handler)
        edited = [self._back(m, original) for m, original in zip(seen, rest, strict=True)]
        prompt = [*systems, *edited]
        return trim_baseline(prompt, self.budget, self.count) if self.trim else prompt

    @staticmethod
    def _back(message: Any, original: Message) -> Message:
        """The caller's dict for an untouched message (the middleware deep-copies them all,
        in place and order; an unedited copy converts back equal), else the converted edit."""
        converted = from_langchain(message)
        return original if converted == original else converted

    def answered(self, position: int, prompt_tokens: int, answer: Message) -> None:
        """Nothing to carry: the middleware's edits are per request."""

    def close(self) -> None:
        """Nothing to release."""


def make_peer(
    policy: str, budget: int, count: CountMessage, text_counter: Callable[[str], int]
) -> HarnessReplay | LangChainClear:
    """The replay object of a peer policy by its bench name (``count`` counts a message,
    ``text_counter`` a string, both with the bench's tokenizer)."""
    if policy == "harness":
        return HarnessReplay(budget, count, text_counter)
    if policy in ("langchain-clear", "langchain-clear-trim"):
        return LangChainClear(budget, count, trim=policy == "langchain-clear-trim")
    raise ValueError(f"unknown peer {policy!r}; known: {', '.join(PEERS)}")
