"""mini-swe-agent trajectories (``*.traj.json``): ``{instance_id, info, messages[]}``.

mini-swe-agent has no tool-calling API: the model writes one ```bash block and the next user
message carries the command's output. We turn that convention into explicit tool calls so these
runs pair calls and results like every other format. A reply with zero or several blocks was
not executed (mini-swe-agent answers it with a format error), so it stays plain text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, cast

from graph import ChatMessage, FunctionCall
from openprogram.importers._model import Imported
from openprogram.importers._reading import (
    Bad,
    Reading,
    flatten_text,
    get,
    kind,
    load_document,
    parse_time,
)

__all__ = ["read_mini_swe_agent"]

_BASH = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
_RETURNCODE = re.compile(r"\s*<returncode>(-?\d+)</returncode>")
_Role = Literal["system", "user", "assistant"]
_ROLES = ("system", "user", "assistant")


def read_mini_swe_agent(path: Path, *, skip_bad: bool = False) -> Reading:
    """Read a mini-swe-agent trajectory; bash blocks become ``bash`` tool calls."""
    return Reading(path, _parse, skip_bad=skip_bad)


def _parse(path: Path, reading: Reading) -> Iterator[Imported]:
    document, messages = load_document(path, "messages")
    instance = document.get("instance_id")
    reading.session_id = instance if isinstance(instance, str) else path.name.split(".")[0]
    waiting: str | None = None  # the call id whose output the next user message holds
    for i, raw in enumerate(messages):
        where = f"$.messages[{i}]"
        call_id, waiting = waiting, None
        try:
            if not isinstance(raw, dict):
                raise Bad(where, f"expected a message object, got {kind(raw)}")
            role = get(raw, "role", str, where)
            if role not in _ROLES:
                raise Bad(f"{where}.role", f"expected one of {list(_ROLES)}, got {role!r}")
            content = flatten_text(raw.get("content"), f"{where}.content")
            if role == "assistant":
                item = _assistant(raw, content, f"call_{i}", where)
                waiting = f"call_{i}" if "tool_calls" in item.message else None
            elif role == "user" and call_id is not None:
                item = Imported(message=_output(call_id, content))
            else:
                said: ChatMessage = {
                    "role": cast("_Role", role),
                    "content": content,
                }  # one of _ROLES
                item = Imported(message=said)
        except Bad as error:
            reading.bad(error.where, error.problem)
            continue
        yield item


def _assistant(raw: Mapping[str, object], content: str, call_id: str, where: str) -> Imported:
    message: ChatMessage = {"role": "assistant", "content": content}
    blocks = list(_BASH.finditer(content))
    if len(blocks) == 1:
        block = blocks[0]
        message["content"] = (content[: block.start()] + content[block.end() :]).strip()
        arguments = json.dumps({"command": block.group(1)}, ensure_ascii=False)
        function: FunctionCall = {"name": "bash", "arguments": arguments}
        message["tool_calls"] = [{"id": call_id, "type": "function", "function": function}]
    response = _response(raw)
    reply = _first_choice(response)
    if isinstance(reasoning := reply.get("reasoning"), str) and reasoning:
        message["thinking"] = reasoning
    meta: dict[str, Any] = {
        key: response[key] for key in ("model", "usage", "id", "provider") if key in response
    }
    if "id" in meta:
        meta["response_id"] = meta.pop("id")
    at = parse_time(response.get("created"), f"{where}.extra.response.created")
    return Imported(message=message, at=at, meta=meta)


def _response(raw: Mapping[str, object]) -> Mapping[str, object]:
    extra = raw.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    return response if isinstance(response, dict) else {}


def _first_choice(response: Mapping[str, object]) -> Mapping[str, object]:
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict):
            return message
    return {}


def _output(call_id: str, content: str) -> ChatMessage:
    message: ChatMessage = {"role": "tool", "tool_call_id": call_id, "content": content}
    code = _RETURNCODE.match(content)
    if code is not None:
        message["is_error"] = int(code.group(1)) != 0
    return message
