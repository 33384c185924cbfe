"""Which importer reads a file: by name first (``.traj``, ``.traj.json``), then by a peek at the
first JSON value, because ``.jsonl`` and ``.json`` are shared by several formats."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from openprogram._errors import TraceFormatError, UnknownFormat
from openprogram.importers._claude_code import claude_code_lines, read_claude_code
from openprogram.importers._codex import codex_lines, read_codex
from openprogram.importers._mini_swe_agent import read_mini_swe_agent
from openprogram.importers._openai import is_jsonl, openai_lines, read_openai
from openprogram.importers._reading import TOO_DEEP, LineParser, Reading, too_deep_at
from openprogram.importers._swe_agent import read_swe_agent

__all__ = ["FORMATS", "LINE_FORMATS", "detect_format", "line_parser", "read_trace"]

FORMATS: dict[str, Callable[..., Reading]] = {
    "claude-code": read_claude_code,
    "codex": read_codex,
    "openai": read_openai,
    "swe-agent": read_swe_agent,
    "mini-swe-agent": read_mini_swe_agent,
}
"""Format name → reader; every reader takes ``(path, *, skip_bad=False)``."""

LINE_FORMATS: dict[str, Callable[[Reading], LineParser]] = {
    "claude-code": claude_code_lines,
    "codex": codex_lines,
    "openai": openai_lines,
}
"""Format name → its parser fed line by line, for the JSONL formats (a growing file is read
only where it grew)."""

_CLAUDE_TYPES = {
    "user",
    "assistant",
    "system",
    "summary",
    "progress",
    "file-history-snapshot",
    "queue-operation",
}


def read_trace(path: Path, *, format: str | None = None, skip_bad: bool = False) -> Reading:
    """Read a trace with the reader for ``format``, detected from the file when not given."""
    name = format or detect_format(path)
    reader = FORMATS.get(name)
    if reader is None:
        raise UnknownFormat(f"unknown trace format {name!r}; known: {', '.join(FORMATS)}")
    return reader(Path(path), skip_bad=skip_bad)


def line_parser(path: Path, format: str) -> Callable[[Reading], LineParser] | None:
    """The line-by-line parser of a JSONL trace (None: a format read as one document)."""
    if format == "openai" and not is_jsonl(Path(path)):
        return None
    return LINE_FORMATS.get(format)


def detect_format(path: Path) -> str:
    """The format name of a trace file, from its name and a peek at its content."""
    path = Path(path)
    if path.name.endswith(".traj.json"):
        return "mini-swe-agent"
    if path.suffix == ".traj":
        return "swe-agent"
    first = _first_value(path)
    found = _classify(first)
    if found is None:
        raise UnknownFormat(
            f"{path}: cannot tell which trace format this is (expected one of "
            f"{', '.join(FORMATS)}: Claude Code or Codex JSONL, OpenAI messages as JSON or "
            "JSONL, a SWE-agent .traj or a mini-swe-agent .traj.json)"
        )
    return found


def _first_value(path: Path) -> Any:
    """The first line's JSON value when that line is complete (JSONL), else the whole document.

    A line nested too deeply to decode is passed over: it is a record the reader will report
    (or skip), and the next line still tells the format.
    """
    with path.open("rb") as lines:
        for line in lines:
            if line.strip():
                try:
                    return msgspec.json.decode(line)
                except msgspec.DecodeError:
                    break
                except RecursionError:
                    continue
    data = path.read_bytes()
    if not data.strip():
        raise UnknownFormat(f"{path}: the file is empty")
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError as error:
        raise UnknownFormat(f"{path}: neither JSON nor JSONL ({error})") from None
    except RecursionError:
        raise TraceFormatError(str(path), too_deep_at(data), TOO_DEEP) from None


def _classify(value: Any) -> str | None:
    if isinstance(value, list):
        chat = all(isinstance(item, dict) and "role" in item for item in value)
        return "openai" if chat else None
    if not isinstance(value, dict):
        return None
    if "role" in value:
        return "openai"
    if "payload" in value and isinstance(value.get("type"), str):
        return "codex"
    if isinstance(value.get("type"), str) and value["type"] in _CLAUDE_TYPES:
        return "claude-code"
    if isinstance(value.get("history"), list):
        return "swe-agent"
    if isinstance(value.get("messages"), list):
        mini = "instance_id" in value or str(value.get("trajectory_format", "")).startswith("mini")
        return "mini-swe-agent" if mini else "openai"
    return None
