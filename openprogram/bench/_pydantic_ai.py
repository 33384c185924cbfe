"""OpenAI chat messages as Pydantic AI messages and back, without loss.

The pydantic-ai-harness peer edits Pydantic AI messages, so the bench converts each OpenAI
message into one ``ModelMessage`` (the leading system prompt goes into the first request, with
the first user prompt, as Pydantic AI sends it: :func:`merge_requests`) and converts what the
harness returns back, one dict per request part. What Pydantic AI has no part for (a ``None``
content, the key order, an unusual role, keys such as ``thinking`` or ``name``, the raw
tool-call dicts) rides along in the message's ``metadata``, so an unedited message converts
back to an equal dict, with the same key order and so the same token count. An edited part (a
cleared tool return, a clamped text) comes back with the harness's new text.

Pydantic AI is an optional dependency (``openprogram[bench]``), imported only when used.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from openprogram._errors import BaselineUnavailable
from openprogram._json import obj
from openprogram.bench._metrics import Message, content_text

_META = "openprogram"
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
"""A fixed timestamp for the parts (their default is the wall clock)."""


def pydantic_ai_messages() -> Any:
    """The ``pydantic_ai.messages`` module, or :class:`BaselineUnavailable`."""
    try:
        import pydantic_ai.messages as messages
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise BaselineUnavailable(
            "the harness baseline needs pydantic-ai-harness: pip install 'openprogram[bench]'"
        ) from exc
    return messages


def _text_and_raw(content: Any) -> tuple[str, dict[str, Any]]:
    """The text a part holds for ``content`` and what restores ``content`` exactly."""
    if isinstance(content, str):
        return content, {}
    if content is None:
        return "", {"null_content": True}
    return content_text(content), {"raw_content": content}


def to_pydantic_ai(
    message: Message,
    tool_names: Mapping[str, str] | None = None,
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
) -> Any:
    """One OpenAI chat message as one Pydantic AI ``ModelRequest`` or ``ModelResponse``.

    ``tool_names`` maps a tool call id to its tool's name (a tool return names its tool in
    Pydantic AI); ``input_tokens``/``output_tokens`` set an assistant message's usage, as the
    provider would have reported it for the request that produced the message.
    """
    pa = pydantic_ai_messages()
    role = message.get("role")
    text, meta = _text_and_raw(message.get("content"))
    meta["keys"] = list(message)
    if role == "assistant":
        rest = {k: v for k, v in message.items() if k not in ("role", "content", "tool_calls")}
        thinking = rest.pop("thinking", None)
        parts: list[Any] = []
        if isinstance(thinking, str):
            parts.append(pa.ThinkingPart(thinking))
        elif thinking is not None:
            rest["thinking"] = thinking
        parts.append(pa.TextPart(text))
        raw_calls = message.get("tool_calls")
        if raw_calls is not None:
            meta["raw_calls"] = raw_calls
            for call in raw_calls:
                function = call.get("function") or {}
                arguments = function.get("arguments")
                parts.append(
                    pa.ToolCallPart(
                        str(function.get("name") or ""),
                        arguments if isinstance(arguments, str | dict) else None,
                        str(call.get("id") or ""),
                    )
                )
        meta["rest"] = rest
        usage = pa.RequestUsage(input_tokens=input_tokens or 0, output_tokens=output_tokens or 0)
        return pa.ModelResponse(parts, usage=usage, timestamp=_EPOCH, metadata={_META: meta})
    meta["role"] = role
    meta["rest"] = {
        k: v for k, v in message.items() if k not in ("role", "content", "tool_call_id")
    }
    return pa.ModelRequest(
        [_request_part(pa, message, text, tool_names)],
        timestamp=_EPOCH,
        metadata={_META: {"parts": [meta]}},
    )


def _request_part(pa: Any, message: Message, text: str, names: Mapping[str, str] | None) -> Any:
    role = message.get("role")
    if role == "tool":
        call_id = str(message.get("tool_call_id") or "")
        name = (names or {}).get(call_id) or str(message.get("name") or "")
        return pa.ToolReturnPart(name, text, call_id, timestamp=_EPOCH)
    if role in ("system", "developer"):
        return pa.SystemPromptPart(text, timestamp=_EPOCH)
    return pa.UserPromptPart(text, timestamp=_EPOCH)


def merge_requests(first: Any, second: Any) -> Any:
    """One ``ModelRequest`` holding the parts of both (each converts back to its own dict):
    how Pydantic AI sends a system prompt, in the same request as the first user prompt."""
    metas = [*first.metadata[_META]["parts"], *second.metadata[_META]["parts"]]
    return type(first)(
        [*first.parts, *second.parts], timestamp=_EPOCH, metadata={_META: {"parts": metas}}
    )


def _content_back(text: str, meta: Mapping[str, Any]) -> Any:
    """The original content when the part's text is unchanged, else the new text."""
    if meta.get("null_content") and text == "":
        return None
    if "raw_content" in meta and content_text(meta["raw_content"]) == text:
        return meta["raw_content"]
    return text


def _ordered(values: dict[str, Any], keys: Sequence[str]) -> Message:
    out = {k: values[k] for k in keys if k in values}
    out.update((k, v) for k, v in values.items() if k not in out)
    return cast("Message", out)


def _calls_back(
    calls: list[Any], raw_calls: Sequence[Mapping[str, object]] | None
) -> list[Mapping[str, object]]:
    """The OpenAI tool calls of Pydantic AI's ``calls`` (its parts), each the raw call it came
    from while its arguments still agree (so their string round trips byte for byte)."""
    raw_by_id = {str(c.get("id") or ""): c for c in raw_calls or ()}
    out: list[Mapping[str, object]] = []
    for call in calls:
        raw = raw_by_id.get(call.tool_call_id)
        raw_function = obj(obj(raw).get("function"))
        arguments = call.args
        if not isinstance(arguments, str) and not (
            raw is not None and arguments is None and raw_function.get("arguments") is None
        ):
            arguments = json.dumps(arguments if arguments is not None else {})
        if raw is not None and raw_function.get("arguments") == arguments:
            out.append(raw)
            continue
        base = raw or {"id": call.tool_call_id, "type": "function"}
        function = {**raw_function, "name": call.tool_name, "arguments": arguments}
        out.append({**base, "function": function})
    return out


def from_pydantic_ai(message: Any) -> list[Message]:
    """The OpenAI chat messages for a Pydantic AI message made by :func:`to_pydantic_ai` or
    :func:`merge_requests` (one per request part), edited or not: parts the harness changed
    come back with their new content."""
    pa = pydantic_ai_messages()
    stored: dict[str, Any] = (message.metadata or {}).get(_META, {})
    if isinstance(message, pa.ModelResponse):
        meta = stored
        rest: dict[str, Any] = dict(meta.get("rest", {}))
        texts = [p.content for p in message.parts if isinstance(p, pa.TextPart)]
        thinking = [p.content for p in message.parts if isinstance(p, pa.ThinkingPart)]
        calls = [p for p in message.parts if isinstance(p, pa.ToolCallPart)]
        values: dict[str, Any] = {"role": "assistant", **rest}
        values["content"] = _content_back("".join(texts), meta)
        if thinking:
            values["thinking"] = "".join(thinking)
        if calls or "raw_calls" in meta:
            values["tool_calls"] = _calls_back(calls, meta.get("raw_calls"))
        return [_ordered(values, meta.get("keys") or ["role", "content"])]
    metas: list[dict[str, Any]] = stored.get("parts", [])
    if len(metas) != len(message.parts):
        metas = [{} for _ in message.parts]  # parts added or removed: convert them plainly
    return [_part_back(pa, part, meta) for part, meta in zip(message.parts, metas, strict=True)]


def _part_back(pa: Any, part: Any, meta: dict[str, Any]) -> Message:
    values: dict[str, Any] = {**meta.get("rest", {})}
    content = part.content if isinstance(part.content, str) else str(part.content)
    if isinstance(part, pa.ToolReturnPart):
        values["role"] = "tool"
        values["tool_call_id"] = part.tool_call_id
    elif isinstance(part, pa.SystemPromptPart):
        values["role"] = meta.get("role", "system")
    else:
        values["role"] = meta.get("role", "user")
    values["content"] = _content_back(content, meta)
    return _ordered(values, meta.get("keys") or ["role", "content"])


def tool_names(messages: Sequence[Message]) -> dict[str, str]:
    """Tool name by tool call id, over the assistant messages of ``messages``."""
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            names[str(call.get("id") or "")] = str((call.get("function") or {}).get("name") or "")
    return names
