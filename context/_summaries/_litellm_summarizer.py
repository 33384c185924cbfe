"""A summary written by any model litellm can call.

litellm is imported inside :meth:`LiteLLMSummarizer.summarize` only: importing it costs
seconds, and a render that never summarizes should not pay that. The prompt is cut to the
summarizer's own window before it is sent, so the call that is meant to relieve an
overflowing context cannot overflow itself. Identifiers are ranked from the units, not
taken from the reply: a model may drop or misspell them.
"""

from __future__ import annotations

from typing import Any, Literal

from graph import ChatMessage

from .._budget._models import import_litellm, model_info
from .._budget._tokens import TokenCounter
from .._errors import SummaryError, UnknownModel
from ._fit import finish_summary
from ._identifiers import ranked_unit_identifiers
from ._summary import SummaryRequest, SummaryResult, parse_reply
from ._summary_prompt import SYSTEM, blocks, fit_conversation, instruction
from ._transcript import read_units

DEFAULT_WINDOW = 128_000
"""The window assumed for a model litellm's map does not know."""
_MIN_CONVERSATION = 64
_ATTEMPTS = 4


class LiteLLMSummarizer:
    """Summaries by ``model`` through ``litellm.completion``.

    ``max_output_tokens`` caps the reply (default: ``request.max_tokens``; raise it for a
    reasoning model, the result is trimmed to ``request.max_tokens`` anyway);
    ``max_input_tokens`` overrides the window litellm's map gives (128k when unknown).
    With ``share_prefix`` and a ``request.system``, the agent's system prompt and tools go
    first, so the provider's cache of the agent's prefix is reused. That cache belongs to
    the agent's model, so by default (``"auto"``) the prefix is shared only when this is
    the agent's model (``request.model``); sent to another model it would be paid for in
    full and tell the summary nothing the task does not. Other keyword
    arguments (``api_base``, ``api_key``, ``mock_response``...) go to litellm unchanged.
    Provider errors propagate: the calling tier records them and falls back.

    >>> LiteLLMSummarizer("anthropic/claude-haiku-4-5").name
    'litellm:anthropic/claude-haiku-4-5'
    """

    proactive = True
    """Worth computing ahead of need (see ``Policy.proactive_share``): each call is slow."""

    __slots__ = (
        "_counter",
        "litellm_kwargs",
        "max_input_tokens",
        "max_output_tokens",
        "model",
        "name",
        "share_prefix",
        "timeout",
    )

    def __init__(
        self,
        model: str,
        *,
        max_output_tokens: int | None = None,
        max_input_tokens: int | None = None,
        share_prefix: bool | Literal["auto"] = "auto",
        timeout: float = 60.0,
        **litellm_kwargs: Any,
    ) -> None:
        self.model = model
        self.name = f"litellm:{model}"
        self.max_output_tokens = max_output_tokens
        self.max_input_tokens = max_input_tokens
        self.share_prefix = share_prefix
        self.timeout = timeout
        self.litellm_kwargs = litellm_kwargs
        self._counter: TokenCounter | None = None

    def __repr__(self) -> str:
        return f"LiteLLMSummarizer({self.model!r})"

    @property
    def counter(self) -> TokenCounter:
        """Counts for this model's window (its own encoding, not the agent's)."""
        if self._counter is None:
            self._counter = TokenCounter(self.model)
        return self._counter

    def limits(self, request: SummaryRequest) -> tuple[int, int]:
        """(input tokens the prompt may use, output cap) for ``request``."""
        window, model_output = self.max_input_tokens, None
        try:
            info = model_info(self.model)
            window = window or info.max_input_tokens
            model_output = info.max_output_tokens
        except UnknownModel:
            pass
        window = window or DEFAULT_WINDOW
        output = self.max_output_tokens or request.max_tokens
        if model_output:
            output = min(output, model_output)
        margin = max(64, window // 10)
        return window - output - margin, output

    def messages(self, request: SummaryRequest) -> tuple[list[ChatMessage], list[Any]]:
        """The messages and tools to send, the conversation cut so both fit the window."""
        limit, _ = self.limits(request)
        counter = self.counter
        shared = bool(request.system) and self.shares_prefix(request)
        tools = list(request.tools) if shared else []
        conversation = blocks(read_units(request.units, request.nodes))
        budget = limit
        for _ in range(_ATTEMPTS):
            messages = self._build(request, shared, "")
            fixed = counter.count_messages(messages) + counter.count_tools(tools)
            if shared and fixed + _MIN_CONVERSATION > limit:
                shared, tools = False, []
                continue
            room = min(budget, limit) - fixed
            if room < _MIN_CONVERSATION:
                break
            text = fit_conversation(conversation, counter, room)
            messages = self._build(request, shared, text)
            used = counter.count_messages(messages) + counter.count_tools(tools)
            if used <= limit:
                return messages, tools
            budget = limit - (used - limit) - 16
        raise SummaryError(f"the summarizer's window ({limit} input tokens) cannot hold the prompt")

    def shares_prefix(self, request: SummaryRequest) -> bool:
        """Whether the agent's prefix goes first: always, never, or (``"auto"``) when the
        agent runs on this very model, whose cache already holds that prefix.

        >>> from context import SummaryRequest
        >>> summarizer = LiteLLMSummarizer("anthropic/claude-sonnet-4-5")
        >>> request = SummaryRequest(kind="compact", units=(), model="claude-sonnet-4-5")
        >>> summarizer.shares_prefix(request), LiteLLMSummarizer("gpt-4o").shares_prefix(request)
        (True, False)
        """
        if self.share_prefix != "auto":
            return bool(self.share_prefix)
        return request.model is not None and same_model(request.model, self.model)

    def _build(self, request: SummaryRequest, shared: bool, conversation: str) -> list[ChatMessage]:
        system = request.system if shared else SYSTEM
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": instruction(request, conversation)},
        ]

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        litellm = import_litellm()

        messages, tools = self.messages(request)
        _, output = self.limits(request)
        extra: dict[str, Any] = {}
        if tools:
            supported = _supported_params(litellm, self.model)
            if supported is None or "tools" in supported:
                extra["tools"] = tools
            if extra and (supported is None or "tool_choice" in supported):
                extra["tool_choice"] = "none"
        options = {"max_tokens": output, "timeout": self.timeout, **extra, **self.litellm_kwargs}
        response = litellm.completion(model=self.model, messages=messages, **options)
        reply = response.choices[0].message.content if response.choices else None
        if not isinstance(reply, str) or not reply.strip():
            raise SummaryError(f"{self.name} returned no text")
        anchors, prose, concluded = parse_reply(reply)
        usage = getattr(response, "usage", None)
        identifiers = ranked_unit_identifiers(request.covered)
        return finish_summary(
            request,
            anchors,
            prose,
            identifiers,
            summarizer=self.name,
            carry_prose=False,
            tokens_in=int(getattr(usage, "prompt_tokens", 0) or 0),
            tokens_out=int(getattr(usage, "completion_tokens", 0) or 0),
            concluded=concluded,
        )


def _supported_params(litellm: Any, model: str) -> list[str] | None:
    """The OpenAI parameters litellm maps for ``model`` (None: it cannot tell), so tools
    are only sent where the provider accepts them."""
    try:
        params = litellm.get_supported_openai_params(model=model)
    except Exception:
        return None
    return list(params) if params is not None else None


def same_model(a: str, b: str) -> bool:
    """Whether two litellm names are one model behind one provider, so one prompt cache:
    both resolved through litellm's model map (``model_info``); names it does not know are
    compared without their provider prefix.

    >>> same_model("openai/gpt-4o", "gpt-4o"), same_model("azure/gpt-4o", "gpt-4o")
    (True, False)
    """
    try:
        return model_info(a).name == model_info(b).name
    except UnknownModel:
        return a.rsplit("/", 1)[-1].lower() == b.rsplit("/", 1)[-1].lower()
