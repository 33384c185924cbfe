"""What every format parser shares: the iterator that counts what it skipped, and shape checks.

Parsers raise ``Bad(json_path, problem)`` while reading one record; ``Reading.bad`` turns that into
a ``TraceFormatError`` naming the file and line, or counts it under ``skip_bad``. Keeping this in
one place makes every format report errors the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, TypeVar

import msgspec

from graph import ToolCall, call_id_text
from openprogram._errors import TraceFormatError
from openprogram.importers._model import Imported

__all__ = [
    "MAX_DEPTH",
    "TOO_DEEP",
    "Bad",
    "LineParser",
    "Reading",
    "decode_lines",
    "flatten_text",
    "get",
    "get_call_id",
    "get_name",
    "iter_jsonl",
    "kind",
    "load_json",
    "opt",
    "parse_lines",
    "parse_time",
    "too_deep_at",
    "tool_call",
    "within_depth",
]

T = TypeVar("T")
Parser = Callable[[Path, "Reading"], Iterator[Imported]]

_KINDS: dict[type, str] = {
    str: "a string",
    list: "a list",
    dict: "an object",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "null",
}
_IMAGE_PARTS = frozenset({"image", "image_url", "input_image"})
_BYTE_POS = re.compile(r"byte (\d+)")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")
NEWLINE = b"\n"

MAX_DEPTH = 200
"""Deepest JSON nesting we read. Real traces stay far below it; the cap keeps every later step
(``json.dumps``, the graph's own encoding) well inside Python's recursion limit."""
TOO_DEEP = f"JSON nested deeper than {MAX_DEPTH} levels"


class Bad(Exception):
    """A record without the expected shape: ``where`` is a JSON path into it."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


class Reading(Iterator[Imported]):
    """The records of one trace, plus what reading them skipped or found odd.

    A plain generator cannot report the records it dropped under ``skip_bad``; this iterator
    can: ``skipped`` holds one ``TraceFormatError`` per dropped record, ``warnings`` notes on
    records that were imported but repaired or partly ignored, ``session_id`` the trace's id.
    """

    def __init__(self, path: Path, parse: Parser, *, skip_bad: bool = False) -> None:
        self.path = Path(path)
        self.skip_bad = skip_bad
        self.skipped: list[TraceFormatError] = []
        self.warnings: list[str] = []
        self.session_id: str | None = None
        self._records = parse(self.path, self)

    def __iter__(self) -> Reading:
        return self

    def __next__(self) -> Imported:
        return next(self._records)

    def bad(self, where: str, problem: str) -> None:
        """Raise for a malformed record, or count it when reading with ``skip_bad``."""
        error = TraceFormatError(str(self.path), where, problem)
        if not self.skip_bad:
            raise error
        self.skipped.append(error)

    def warn(self, note: str) -> None:
        """Record a note once: repeated oddities in a long trace should not flood the stats."""
        if note not in self.warnings:
            self.warnings.append(note)


def kind(value: object) -> str:
    """Name a JSON value's type the way an error message should."""
    return _KINDS.get(type(value), type(value).__name__)


def get(obj: Mapping[str, object], key: str, expected: type[T], where: str) -> T:
    """A required field of the expected JSON type."""
    if key not in obj:
        raise Bad(f"{where}.{key}", f"missing; expected {_KINDS[expected]}")
    value = obj[key]
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise Bad(f"{where}.{key}", f"expected {_KINDS[expected]}, got {kind(value)}")
    return value


def get_name(obj: Mapping[str, object], key: str, where: str) -> str:
    """A required non-empty string: call ids and tool names, which the graph keys on."""
    value = get(obj, key, str, where)
    if not value:
        raise Bad(f"{where}.{key}", "expected a non-empty string")
    return value


def get_call_id(obj: Mapping[str, object], key: str, where: str) -> str:
    """A tool call id: a non-empty string, or an integer (a provider that sends one means
    it as an id) as its text, as the graph stores it for a call and its result alike."""
    return get_name({key: call_id_text(obj[key])} if key in obj else obj, key, where)


def opt(obj: Mapping[str, object], key: str, expected: type[T], where: str) -> T | None:
    """An optional field: absent or null gives None, a wrong type is still an error."""
    if obj.get(key) is None:
        return None
    return get(obj, key, expected, where)


def parse_time(value: object, where: str) -> datetime | None:
    """A trace timestamp (ISO 8601 string or Unix seconds) as an aware UTC datetime."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            raise Bad(where, f"timestamp out of range (years 1 to 9999): {value!r}") from None
    if isinstance(value, str):
        try:
            stamp = datetime.fromisoformat(value)
        except ValueError:
            raise Bad(where, f"expected an ISO 8601 timestamp, got {value[:40]!r}") from None
        if stamp.tzinfo is None:
            return stamp.replace(tzinfo=UTC)
        try:
            return stamp.astimezone(UTC)
        except (OverflowError, ValueError):
            raise Bad(where, f"timestamp out of range in UTC: {value[:40]!r}") from None
    raise Bad(where, f"expected a timestamp, got {kind(value)}")


def flatten_text(content: object, where: str) -> str:
    """Content as plain text: a string, or a list of parts whose text is joined by newlines.

    Images and other non-text parts become a short ``[image]``-style placeholder, so the
    message keeps a trace of them without carrying binary payloads into the graph.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise Bad(where, f"expected a string or a list of content parts, got {kind(content)}")
    texts: list[str] = []
    for i, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            raise Bad(f"{where}[{i}]", f"expected a content part object, got {kind(part)}")
        text = part.get("text")
        if isinstance(text, str):
            texts.append(text)
        elif isinstance(part.get("type"), str) and part["type"] in _IMAGE_PARTS:
            texts.append("[image]")
        else:
            texts.append(f"[{part.get('type', 'unknown')}]")
    return "\n".join(texts)


def tool_call(raw: object, where: str) -> ToolCall:
    """One OpenAI tool call, with ``arguments`` always a JSON string."""
    if not isinstance(raw, dict):
        raise Bad(where, f"expected a tool call object, got {kind(raw)}")
    call_id = get_call_id(raw, "id", where)
    function = get(raw, "function", dict, where)
    name = get_name(function, "name", f"{where}.function")
    arguments = function.get("arguments")
    if arguments is None:
        arguments = "{}"
    elif not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


class LineParser(Protocol):
    """A JSONL format's parser, fed one decoded line at a time (so a growing file is read
    only where it grew): ``feed`` yields the records a line completes, ``end`` those still
    held when the file ends (a record a later line could still have extended)."""

    def feed(self, number: int, record: Mapping[str, object]) -> Iterator[Imported]: ...

    def end(self) -> Iterator[Imported]: ...


def parse_lines(path: Path, reading: Reading, parser: LineParser) -> Iterator[Imported]:
    """Every record of a JSONL file, through ``parser``."""
    for number, record in iter_jsonl(path, reading):
        yield from parser.feed(number, record)
    yield from parser.end()


def iter_jsonl(path: Path, reading: Reading) -> Iterator[tuple[int, Mapping[str, object]]]:
    """Each non-blank line's JSON object with its 1-based line number; bad lines go to ``bad``."""
    with path.open("rb") as lines:
        yield from decode_lines(lines, reading)


def decode_lines(
    lines: Iterable[bytes], reading: Reading, first: int = 1
) -> Iterator[tuple[int, Mapping[str, object]]]:
    """``iter_jsonl`` over lines already read, numbered from ``first``. A line holding whole
    objects back to back (a writer that once left out a newline) gives each of them."""
    decode = msgspec.json.Decoder().decode
    for number, line in enumerate(lines, first):
        if not line.strip():
            continue
        try:
            records = [decode(line)]
        except msgspec.DecodeError as error:
            joined = _back_to_back(line)
            if joined is None:
                reading.bad(f"line {number}", f"expected a JSON object ({error})")
                continue
            records = joined
        except RecursionError:
            reading.bad(f"line {number}", TOO_DEEP)
            continue
        for record in records:
            if not isinstance(record, dict):
                reading.bad(f"line {number}", f"expected a JSON object, got {kind(record)}")
                continue
            if not within_depth(record):
                reading.bad(f"line {number}", TOO_DEEP)
                continue
            yield number, record


def _back_to_back(line: bytes) -> list[object] | None:
    """The values of a line of several whole JSON values in a row; None when it is not one."""
    try:
        text = line.decode().strip()
    except UnicodeDecodeError:
        return None
    decoder = json.JSONDecoder()
    values: list[object] = []
    at = 0
    try:
        while at < len(text):
            value, at = decoder.raw_decode(text, at)
            values.append(value)
            while at < len(text) and text[at].isspace():
                at += 1
    except (ValueError, RecursionError):
        return None
    return values if len(values) > 1 else None


def load_json(path: Path) -> object:
    """A whole-file JSON document; a syntax error or too deep a nesting names its line."""
    data = path.read_bytes()
    try:
        document = msgspec.json.decode(data)
    except msgspec.DecodeError as error:
        found = _BYTE_POS.search(str(error))
        where = f"line {data.count(NEWLINE, 0, int(found.group(1))) + 1}" if found else "$"
        raise TraceFormatError(str(path), where, f"expected valid JSON ({error})") from None
    except RecursionError:
        raise TraceFormatError(str(path), too_deep_at(data), TOO_DEEP) from None
    if not within_depth(document):
        raise TraceFormatError(str(path), too_deep_at(data), TOO_DEEP)
    return document


def within_depth(value: object, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests at most ``limit`` lists and objects deep (checked without
    recursion, so the check itself cannot overflow)."""
    if not isinstance(value, dict | list):
        return True
    stack: list[tuple[dict[str, object] | list[object], int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
    return True


def too_deep_at(data: bytes, limit: int = MAX_DEPTH) -> str:
    """``line N`` where the JSON in ``data`` first nests deeper than ``limit`` (strings skipped)."""
    blanked = _STRING.sub(lambda m: b"_" * len(m.group()), data)
    depth = 0
    for bracket in _BRACKET.finditer(blanked):
        depth += 1 if bracket.group() in b"[{" else -1
        if depth > limit:
            return f"line {data.count(NEWLINE, 0, bracket.start()) + 1}"
    return "$"


def load_document(path: Path, key: str) -> tuple[Mapping[str, object], list[object]]:
    """A whole-file JSON object and the list under ``key``, or an error naming the JSON path."""
    document = load_json(path)
    if not isinstance(document, dict):
        raise TraceFormatError(str(path), "$", f"expected an object, got {kind(document)}")
    items = document.get(key)
    if not isinstance(items, list):
        raise TraceFormatError(str(path), f"$.{key}", f"expected a list, got {kind(items)}")
    return document, items
