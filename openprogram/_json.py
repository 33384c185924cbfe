"""JSON as a client or a provider sends it, read defensively: what a value is gets checked
where it is read, by the small accessors here, instead of trusting ``Any``.

``JSONObject`` is an object read (never written through); ``JSONValue`` any JSON value
built or forwarded. Each accessor reads a value as ``value or default`` reads it for
well-formed JSON (a missing or null value gives the default), so a rewrite that goes
through them sends the same bytes.
"""

from collections.abc import Mapping
from typing import TypeAlias

__all__ = ["JSONObject", "JSONValue", "count", "items", "obj", "objects", "text"]

JSONValue: TypeAlias = "str | int | float | bool | list[JSONValue] | dict[str, JSONValue] | None"
"""Any JSON value (what ``json.loads`` gives)."""
JSONObject: TypeAlias = Mapping[str, object]
"""A JSON object read defensively (each value checked where it is used)."""


def obj(value: object) -> JSONObject:
    """``value`` if it is an object, else a new empty one (a missing or null object)."""
    return value if isinstance(value, dict) else {}


def items(value: object) -> list[object]:
    """``value``'s entries if it is an array, else none."""
    return list(value) if isinstance(value, list | tuple) else []


def objects(value: object) -> list[JSONObject]:
    """The objects among ``value``'s entries (an array of objects, as most are)."""
    return [entry for entry in items(value) if isinstance(entry, dict)]


def text(value: object, default: str = "") -> str:
    """``value`` as text (``str(value or default)``): ``default`` when missing or null."""
    return str(value) if value else default


def count(value: object) -> int:
    """A token count as JSON gives it (a whole number, a float, digits); 0 when missing."""
    if not value:
        return 0
    if isinstance(value, int | float | str):
        return int(value)
    raise TypeError(f"not a count: {value!r}")
