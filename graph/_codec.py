"""JSON encoding of payloads, events and meta, shared by every store.

Values are normalized through the same encoding the database uses, so a node read back
from a store equals the node that was appended.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from ._errors import InvalidMessage
from ._nodes import EventData, Payload


def _fallback(value: Any) -> Any:
    return repr(value)


_encoder = msgspec.json.Encoder(enc_hook=_fallback, order="deterministic")
_payload_decoder = msgspec.json.Decoder(Payload)
_event_decoder = msgspec.json.Decoder(EventData)
_any_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder()


def encode(value: Any) -> str:
    """Deterministic JSON text (unknown objects become their repr)."""
    return _encoder.encode(value).decode()


def decode_payload(text: str) -> Payload:
    return _payload_decoder.decode(text)


def decode_event(text: str) -> EventData:
    return _event_decoder.decode(text)


def decode_any(text: str) -> Any:
    return _any_decoder.decode(text)


def normalize_payload(payload: Payload) -> Payload:
    """The payload as a store will give it back."""
    return decode_payload(encode(payload))


def normalize_event(data: EventData) -> EventData:
    return decode_event(encode(data))


def normalize_meta(meta: Any, field: str = "meta") -> dict[str, Any]:
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise InvalidMessage(field, f"must be a dict, not {type(meta).__name__}")
    value = decode_any(encode(meta))
    assert isinstance(value, dict)
    return value


def to_micros(at: datetime) -> int:
    delta = at - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int) -> datetime:
    seconds, micros = divmod(value, 1_000_000)
    return datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=micros)


def normalize_time(at: Any, field: str = "at") -> datetime:
    """An aware UTC datetime from None (now), a datetime, epoch seconds or ISO-8601 text."""
    if at is None:
        value = datetime.now(UTC)
    elif isinstance(at, datetime):
        value = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    elif isinstance(at, int | float) and not isinstance(at, bool):
        value = datetime.fromtimestamp(float(at), tz=UTC)
    elif isinstance(at, str):
        try:
            value = datetime.fromisoformat(at.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidMessage(field, f"not an ISO-8601 time: {at!r}") from None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
    else:
        raise InvalidMessage(field, f"must be a datetime, epoch seconds or ISO text, not {at!r}")
    return from_micros(to_micros(value))
