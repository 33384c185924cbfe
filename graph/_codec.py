"""JSON encoding of payloads, events and meta, shared by every store.

Values are normalized through the same encoding the database uses, so a node read back
from a store equals the node that was appended.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
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


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(at: datetime) -> int:
    delta = at - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int) -> datetime:
    """The UTC time ``value`` microseconds after the epoch (exact integer arithmetic, and
    a third of ``fromtimestamp``'s cost: a reopen makes one per node)."""
    return _EPOCH + timedelta(microseconds=value)


def normalize_time(at: Any, field: str = "at") -> datetime:
    """An aware UTC datetime from None (now), a datetime, epoch seconds or ISO-8601 text.

    A time outside what a UTC datetime holds (years 1 to 9999) is an ``InvalidMessage``.
    """
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
