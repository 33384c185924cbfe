"""Server-sent events as they pass: whole events out of a byte stream, each with its raw
bytes (sent on unchanged) and its ``data`` parsed; and an event written anew."""

from __future__ import annotations

import json
from dataclasses import dataclass

from openprogram._json import JSONObject, JSONValue

__all__ = ["Event", "Events", "encode"]


@dataclass(frozen=True)
class Event:
    """One event: its bytes as they came (blank line included), name and parsed data."""

    raw: bytes
    name: str
    data: JSONValue


def _parse(raw: bytes) -> Event:
    name, lines = "", []
    for line in raw.split(b"\n"):
        line = line.rstrip(b"\r")
        if line.startswith(b"event:"):
            name = line[6:].strip().decode("utf-8", "replace")
        elif line.startswith(b"data:"):
            lines.append(line[5:].strip())
    text = b"\n".join(lines)
    try:
        data = json.loads(text) if text and text != b"[DONE]" else None
    except ValueError:
        data = None
    if not name and isinstance(data, dict) and isinstance(kind := data.get("type"), str):
        name = kind
    return Event(raw, name, data)


class Events:
    """Cuts a byte stream into whole events (what is left of an event waits for more)."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, chunk: bytes) -> list[Event]:
        self._pending += chunk
        out = []
        while True:
            ends = [(at, len(mark)) for mark in (b"\n\n", b"\r\n\r\n")
                    if (at := self._pending.find(mark)) >= 0]  # fmt: skip
            if not ends:
                break
            cut, size = min(ends)
            raw, self._pending = self._pending[: cut + size], self._pending[cut + size :]
            if raw.strip():
                out.append(_parse(raw))
        return out

    def rest(self) -> bytes:
        """Bytes after the last whole event (sent on as they are at the end)."""
        rest, self._pending = self._pending, b""
        return rest


def encode(name: str, data: JSONObject) -> bytes:
    """An event written anew (the providers' own layout: ``event:`` then ``data:``)."""
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
