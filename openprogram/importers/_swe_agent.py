"""SWE-agent ``.traj`` files: ``{environment, trajectory, history, info}``.

``history`` is the chat the model saw, already OpenAI-shaped, so each entry goes through the
shared ``chat_message``. What is SWE-agent's own: few-shot demonstrations (``is_demo``), which
are not part of the run and are dropped, tool replies that name their calls in a
``tool_call_ids`` list, and bookkeeping keys (``thought``, ``action``, ``agent``,
``message_type``) kept as meta.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from openprogram.importers._model import Imported
from openprogram.importers._openai import chat_message
from openprogram.importers._reading import Bad, Reading, flatten_text, load_document, opt

__all__ = ["read_swe_agent"]


def read_swe_agent(path: Path, *, skip_bad: bool = False) -> Reading:
    """Read a SWE-agent trajectory (``*.traj``), function-calling or plain."""
    return Reading(path, _parse, skip_bad=skip_bad)


def _parse(path: Path, reading: Reading) -> Iterator[Imported]:
    _, history = load_document(path, "history")
    reading.session_id = path.name.removesuffix(".traj")
    for i, raw in enumerate(history):
        if isinstance(raw, dict) and raw.get("is_demo") is True:
            continue
        try:
            out = _entry(raw, f"$.history[{i}]", reading)
        except Bad as error:
            reading.bad(error.where, error.problem)
            continue
        yield from out


def _entry(raw: object, where: str, reading: Reading) -> list[Imported]:
    if isinstance(raw, dict) and raw.get("role") == "tool" and "tool_call_ids" in raw:
        return _tool_replies(raw, where, reading)
    message, extra = chat_message(raw, where)
    if extra.get("thought") == message["content"]:
        del extra["thought"]  # the function-calling variant repeats the content there
    return [Imported(message=message, meta=extra)]


def _tool_replies(raw: dict[str, Any], where: str, reading: Reading) -> list[Imported]:
    """One tool message per id; SWE-agent runs one call per turn, so extra ids get no text."""
    ids = opt(raw, "tool_call_ids", list, where) or []
    if not ids or not all(isinstance(call_id, str) and call_id for call_id in ids):
        raise Bad(f"{where}.tool_call_ids", "expected a non-empty list of call id strings")
    content = flatten_text(raw.get("content"), f"{where}.content")
    meta = {key: value for key, value in raw.items() if key not in ("role", "content")}
    if len(ids) > 1:
        reading.warn("a tool reply answers several calls; its text goes to the first one")
    return [
        Imported(
            message={"role": "tool", "tool_call_id": call_id, "content": content if n == 0 else ""},
            meta=meta,
        )
        for n, call_id in enumerate(ids)
    ]
