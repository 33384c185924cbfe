"""JSON encoding of payloads, events and meta, shared by every store.

Values are normalized through the same encoding the database uses, so a node read back
from a store equals the node that was appended.

What JSON in UTF-8 cannot hold is refused with an :class:`InvalidMessage` naming where it
is, never stored and never surfacing as a ``UnicodeEncodeError`` or ``TypeError``:

* a lone surrogate (``"\\ud800"``, what a broken ``\\u`` escape decodes to) is refused, not
  stored with an escape: no provider accepts it (a request body is UTF-8), every store and
  file we write is UTF-8, and a ``surrogatepass`` round trip would hand back a value that
  breaks the next tool that reads it. The field says where, e.g. ``content[0].text``;
* a dict key that is not a string (JSON keys are strings; converting one silently would
  change what a reader gets back);
* nesting deeper than :data:`MAX_DEPTH` levels (checked before anything recursive runs, so
  the redactor, the encoder and readers never hit Python's recursion limit);
* an int too long to write as decimal text (Python refuses over 4300 digits).

NUL characters are fine: JSON escapes them (``\\u0000``), so PostgreSQL's text columns,
which refuse a raw NUL, store them losslessly too. Other unknown objects become their repr.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from ._errors import InvalidMessage
from ._nodes import Dialogue, EventData, Payload, Tool, ToolResult

MAX_DEPTH = 100
"""Deepest nesting of lists and dicts a stored value may have (OpenAI messages need 4)."""


def _fallback(value: Any) -> Any:
    return repr(value)


_encoder = msgspec.json.Encoder(enc_hook=_fallback, order="deterministic")
_payload_decoder = msgspec.json.Decoder(Payload)
_event_decoder = msgspec.json.Decoder(EventData)
_any_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder()


encode_json = _encoder.encode
"""``encode`` as bytes (the rows of an append call it without a wrapper)."""


def encode(value: Any) -> str:
    """Deterministic JSON text (unknown objects become their repr)."""
    return _encoder.encode(value).decode()


def decode_payload(text: str) -> Payload:
    return _payload_decoder.decode(text)


def decode_event(text: str) -> EventData:
    return _event_decoder.decode(text)


def decode_any(text: str) -> Any:
    return _any_decoder.decode(text)


def encode_checked(value: Any, field: str, source: Any = None, *, deep_ok: bool = False) -> str:
    """``encode(value)``, or an :class:`InvalidMessage` naming the first place in ``source``
    (what the caller was given; ``value`` itself by default) that JSON cannot hold.
    ``deep_ok``: the caller has run :func:`check_depth` over ``source`` already."""
    if not deep_ok:
        check_depth(value if source is None else source, field)
    try:
        return encode(value)
    except Exception as error:  # UnicodeEncodeError, TypeError, ValueError, a failing repr
        found = find_unstorable(value if source is None else source, field)
        where, problem = found or (field, f"cannot be stored as JSON ({error})")
        raise InvalidMessage(where, problem) from None


def normalize_payload(
    payload: Payload, field: str = "message", source: Any = None, *, deep_ok: bool = False
) -> Payload:
    """The payload as a store will give it back (``source``, ``deep_ok``: see
    ``encode_checked``)."""
    if is_plain(payload):
        return payload
    return decode_payload(encode_checked(payload, field, source, deep_ok=deep_ok))


def normalize_event(
    data: EventData, field: str = "event", source: Any = None, *, deep_ok: bool = False
) -> EventData:
    if is_plain(data):
        return data
    return decode_event(encode_checked(data, field, source, deep_ok=deep_ok))


_ROLES = frozenset(("system", "user", "assistant"))


def _all_text(*values: Any) -> bool:
    """Each value None or a plain ``str`` that UTF-8 can hold: JSON gives it back unchanged."""
    for value in values:
        if value is None:
            continue
        if type(value) is not str or not (value.isascii() or not _has_lone_surrogate(value)):
            return False
    return True


def is_plain(payload: Payload | EventData) -> bool:
    """Whether ``payload`` holds only text that round-trips through JSON unchanged (most
    messages and tool results): normalizing it is then the identity, with no encode and
    decode to pay."""
    kind = type(payload)
    if kind is ToolResult:
        assert isinstance(payload, ToolResult)
        return type(payload.is_error) is bool and _all_text(payload.content)
    if kind is Dialogue:
        assert isinstance(payload, Dialogue)
        return (
            type(payload.role) is str
            and payload.role in _ROLES
            and _all_text(payload.content, payload.thinking, payload.name)
        )
    if kind is Tool:
        assert isinstance(payload, Tool)
        return _all_text(payload.name, payload.arguments, payload.call_id)
    return False


def normalize_meta(meta: Any, field: str = "meta") -> dict[str, Any]:
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise InvalidMessage(field, f"must be a dict, not {type(meta).__name__}")
    value = decode_any(encode_checked(meta, field))
    assert isinstance(value, dict)
    return value


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _items(value: Any) -> list[tuple[Any, Any]]:
    """A container's (key or index, item) pairs; nothing for anything else."""
    if isinstance(value, msgspec.Struct):
        value = msgspec.structs.asdict(value)
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, list | tuple):
        return list(enumerate(value))
    return []


def _path(path: str, label: Any) -> str:
    """Where an item is; a message's own fields are named bare (``content[0].text``,
    ``tool_calls[1].id``), as ``parse_message`` names them."""
    if isinstance(label, int) and not isinstance(label, bool):
        return f"{path}[{label}]"
    return f"{label}" if path == "message" else f"{path}.{label}"


_CONTAINERS = (Mapping, list, tuple, msgspec.Struct)


_PLAIN = (dict, list, tuple)
_SCALARS = (str, int, float, bool, type(None))


def check_depth(value: Any, field: str) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH` (iteratively: any depth is safe here).

    Only containers are visited, so a message of long strings costs next to nothing; the
    path of an item is spelled out only for the error (a trail of labels until then).
    """
    todo: list[tuple[Any, Any, int]] = [(value, None, 0)]
    while todo:
        item, trail, depth = todo.pop()
        if depth > MAX_DEPTH:
            raise InvalidMessage(
                _trail_path(field, trail), f"nested deeper than {MAX_DEPTH} levels"
            )
        kind = type(item)
        pairs = (
            item.items() if kind is dict else enumerate(item) if kind in _PLAIN else _items(item)
        )
        for label, child in pairs:
            kind = type(child)
            if kind in _PLAIN or (kind not in _SCALARS and isinstance(child, _CONTAINERS)):
                todo.append((child, (trail, label), depth + 1))


def _trail_path(field: str, trail: Any) -> str:
    labels = []
    while trail is not None:
        trail, label = trail
        labels.append(label)
    path = field
    for label in reversed(labels):
        path = _path(path, label)
    return path


def find_unstorable(value: Any, field: str) -> tuple[str, str] | None:
    """The first (path, problem) in ``value`` that JSON in UTF-8 cannot hold, or None."""
    todo = [(value, field)]
    while todo:
        item, path = todo.pop()
        if isinstance(item, str):
            if _has_lone_surrogate(item):
                return path, "holds a lone surrogate (U+D800 to U+DFFF), which UTF-8 cannot store"
            continue
        if isinstance(item, int):
            try:
                str(item)
            except ValueError:
                return path, "is an integer too long to store"
            continue
        if isinstance(item, Mapping):
            for key in item:
                if not isinstance(key, str):
                    return path, f"has a key that is not a string: {type(key).__name__}"
                if _has_lone_surrogate(key):
                    return path, "has a key with a lone surrogate, which UTF-8 cannot store"
        items = _items(item)
        if items:
            todo.extend((child, _path(path, label)) for label, child in reversed(items))
        elif item is not None and not isinstance(item, (float, *_CONTAINERS)):
            try:
                text = repr(item)
            except Exception:
                return path, f"a {type(item).__name__} that cannot be stored (its repr fails)"
            if _has_lone_surrogate(text):
                return path, f"a {type(item).__name__} whose text holds a lone surrogate"
    return None


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def to_micros(at: datetime) -> int:
    delta = at - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int) -> datetime:
    """The UTC time ``value`` microseconds after the epoch (exact integer arithmetic, and
    a third of ``fromtimestamp``'s cost: a reopen makes one per node)."""
    return EPOCH + timedelta(microseconds=value)


def normalize_time(at: Any, field: str = "at") -> datetime:
    """An aware UTC datetime from None (now), a datetime, epoch seconds or ISO-8601 text.

    A time outside what a UTC datetime holds (years 1 to 9999) is an ``InvalidMessage``.
    """
    if at is None:
        return datetime.now(UTC)  # already what a store gives back: UTC, to the microsecond
    try:
        return from_micros(to_micros(_as_datetime(at, field)))
    except (OverflowError, OSError, ValueError) as error:
        if isinstance(error, InvalidMessage):
            raise
        raise InvalidMessage(field, f"out of range (years 1 to 9999 UTC): {at!r}") from None


def _as_datetime(at: Any, field: str) -> datetime:
    if at is None:
        return datetime.now(UTC)
    if isinstance(at, datetime):
        return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    if isinstance(at, int | float) and not isinstance(at, bool):
        return datetime.fromtimestamp(float(at), tz=UTC)
    if isinstance(at, str):
        try:
            value = datetime.fromisoformat(at.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidMessage(field, f"not an ISO-8601 time: {at!r}") from None
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    raise InvalidMessage(field, f"must be a datetime, epoch seconds or ISO text, not {at!r}")
