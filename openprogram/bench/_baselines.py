"""The two baselines the bench runs next to our policies.

- observation masking: what the "keep the last N observations" papers do, no budget at all;
- LangChain ``trim_messages`` (strategy last, start on a human message, keep the system prompt):
  what most applications reach for first.

LangChain is an optional dependency (``openprogram[bench]``) and is imported only when the trim
baseline is used; without it :func:`trim_baseline` raises :class:`BaselineUnavailable`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from openprogram._errors import BaselineUnavailable, BenchError
from openprogram._json import obj
from openprogram.bench._metrics import CountMessage, Message, content_text

#: Key in ``additional_kwargs`` carrying what LangChain messages cannot hold (None content, role).
_META = "openprogram"


def observation_masking(messages: Sequence[Message], keep: int = 10) -> list[Message]:
    """Mask all but the last ``keep`` tool outputs with a placeholder saying how long they were.

    Masked messages are new dicts; every other message is returned as the same object (the input
    is never mutated). Traces without tool messages come back unchanged.
    """
    if keep < 0:
        raise BenchError(f"keep must be >= 0, got {keep}")
    tool_indices = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    masked = set(tool_indices[: max(0, len(tool_indices) - keep)])
    out: list[Message] = []
    for index, message in enumerate(messages):
        if index in masked:
            chars = len(content_text(message.get("content")))
            message = {**message, "content": f"[output masked: {chars} chars]"}
        out.append(message)
    return out


def _lc() -> Any:
    try:
        import langchain_core.messages as messages
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise BaselineUnavailable(
            "the trim_messages baseline needs langchain-core: pip install 'openprogram[bench]'"
        ) from exc
    return messages


def to_langchain(message: Message) -> Any:
    """An OpenAI chat message as a LangChain message, keeping what LangChain has no field for
    (None content, a ``developer`` role, unknown keys) in ``additional_kwargs`` so
    :func:`from_langchain` gives the same dict back."""
    lc = _lc()
    role = message.get("role")
    content = message.get("content")
    extra = {
        k: v
        for k, v in message.items()
        if k not in ("role", "content", "name", "tool_calls", "tool_call_id")
    }
    meta: dict[str, Any] = {}
    if content is None:
        meta["null_content"] = True
        content = ""
    if role not in ("system", "user", "assistant", "tool"):
        meta["role"] = role
    if meta:
        extra[_META] = meta
    common: dict[str, Any] = {"content": content, "additional_kwargs": extra}
    if message.get("name") is not None:
        common["name"] = message["name"]
    if role in ("system", "developer"):
        return lc.SystemMessage(**common)
    if role == "user":
        return lc.HumanMessage(**common)
    if role == "tool":
        return lc.ToolMessage(tool_call_id=str(message.get("tool_call_id") or ""), **common)
    if role == "assistant":
        raw_calls = message.get("tool_calls")
        if raw_calls is None:
            return lc.AIMessage(**common)
        calls: list[dict[str, Any]] = []
        invalid: list[dict[str, Any]] = []
        for call in raw_calls:
            function = call.get("function") or {}
            name, arguments = function.get("name"), function.get("arguments")
            error: str | None
            try:
                args = json.loads(arguments) if isinstance(arguments, str) else arguments
            except ValueError as exc:
                args, error = None, f"arguments are not JSON: {exc}"
            else:
                error = None if isinstance(args, dict) else "arguments are not a JSON object"
            if error is None:
                calls.append({"name": name, "args": args, "id": call.get("id")})
            else:
                invalid.append(
                    {"name": name, "args": arguments, "id": call.get("id"), "error": error}
                )
        # The raw OpenAI calls ride along, as langchain-openai does, so argument strings round
        # trip byte for byte (json.dumps would respace them and change their token count).
        common["additional_kwargs"] = {**extra, "tool_calls": raw_calls}
        return lc.AIMessage(tool_calls=calls, invalid_tool_calls=invalid, **common)
    return lc.ChatMessage(role=str(role), **common)


def _calls_back(
    message: Any, raw_calls: Sequence[Mapping[str, object]] | None
) -> list[Mapping[str, object]]:
    """OpenAI tool calls from a LangChain AIMessage, reusing the raw call (and its exact argument
    string) wherever the parsed call still agrees with it."""
    raw_by_id = {c.get("id"): c for c in raw_calls or ()}
    built: dict[object, Mapping[str, object]] = {}
    for call in message.tool_calls:
        raw = raw_by_id.get(call["id"])
        raw_args = obj(obj(raw).get("function")).get("arguments")
        try:
            same = isinstance(raw_args, str) and json.loads(raw_args) == call["args"]
        except ValueError:
            same = False
        arguments = raw_args if same else json.dumps(call["args"])
        built[call["id"]] = _call(raw, call["id"], call["name"], arguments)
    for call in message.invalid_tool_calls:
        raw = raw_by_id.get(call["id"])
        built[call["id"]] = _call(raw, call["id"], call["name"], call["args"])
    order = [c.get("id") for c in raw_calls or () if c.get("id") in built]
    order += [i for i in built if i not in raw_by_id]
    return [built[i] for i in order]


def _call(
    raw: Mapping[str, object] | None, call_id: object, name: object, arguments: object
) -> Mapping[str, object]:
    base = raw or {"id": call_id, "type": "function"}
    function = {**obj(base.get("function")), "name": name, "arguments": arguments}
    return {**base, "id": call_id, "function": function}


def from_langchain(message: Any) -> Message:
    """The OpenAI chat message for a LangChain message made by :func:`to_langchain` (or any
    system/human/AI/tool/chat message)."""
    lc = _lc()
    extra = dict(message.additional_kwargs)
    meta = extra.pop(_META, {})
    raw_calls = extra.pop("tool_calls", None)
    if isinstance(message, lc.SystemMessage):
        role = "system"
    elif isinstance(message, lc.HumanMessage):
        role = "user"
    elif isinstance(message, lc.AIMessage):
        role = "assistant"
    elif isinstance(message, lc.ToolMessage):
        role = "tool"
    else:
        role = getattr(message, "role", message.type)
    out: dict[str, Any] = {"role": meta.get("role", role)}
    out["content"] = None if meta.get("null_content") else message.content
    if message.name is not None:
        out["name"] = message.name
    if role == "assistant" and (
        raw_calls is not None or message.tool_calls or message.invalid_tool_calls
    ):
        out["tool_calls"] = _calls_back(message, raw_calls)
    if role == "tool":
        out["tool_call_id"] = message.tool_call_id
    out.update(extra)
    return cast("Message", out)


def trim_baseline(
    messages: Sequence[Message], budget: int, count_message: CountMessage
) -> list[Message]:
    """LangChain ``trim_messages`` (last, start_on human, include_system) under ``budget``.

    Tokens are counted by converting each LangChain message back to its OpenAI dict and calling
    ``count_message``, so the baseline is judged by the same counter as every other policy. The
    counter is a list counter (LangChain tells per-message counters apart by an annotation that
    postponed annotations would hide); per-message counts are memoised for the binary search.
    The result holds the caller's own dicts (trim_messages only drops messages), never copies.

    Raises :class:`BaselineUnavailable` when langchain-core is not installed.
    """
    lc = _lc()
    converted = [to_langchain(m) for m in messages]
    originals = {id(lc_message): m for lc_message, m in zip(converted, messages, strict=True)}
    counts: dict[int, int] = {}
    counted: list[Message] = []  # keeps counted dicts alive, so a counter may cache by id()

    def token_counter(batch: list[Any]) -> int:
        total = 0
        for message in batch:
            key = id(message)
            if key not in counts:
                counted.append(from_langchain(message))
                counts[key] = count_message(counted[-1])
            total += counts[key]
        return total

    trimmed = lc.trim_messages(
        converted,
        max_tokens=budget,
        token_counter=token_counter,
        strategy="last",
        start_on="human",
        include_system=True,
    )
    # Without allow_partial, trim_messages returns our own message objects; hand back the
    # caller's dicts for them (identical objects keep id-keyed caches and prefix checks cheap).
    return [originals[id(m)] if id(m) in originals else from_langchain(m) for m in trimmed]
