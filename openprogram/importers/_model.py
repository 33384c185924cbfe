"""The one record type every importer yields, so the driver never sees a trace format."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from graph import ChatMessage

__all__ = ["MARKERS", "Imported"]

MARKERS = ("compact_boundary", "compact_summary")
"""Values of ``Imported.marker``: a native compaction's boundary and the summary that follows it."""


class Imported(msgspec.Struct, frozen=True, kw_only=True):
    """One conversation message taken from a trace.

    ``message`` is an OpenAI chat message (``role`` system/user/assistant/tool, ``content`` a
    string; assistants may carry ``tool_calls`` and ``thinking``; tool messages ``tool_call_id``
    and ``is_error`` when the trace says). ``at`` is the trace's own UTC timestamp, ``meta`` the
    provider's ids, model and usage, ``marker`` flags native compactions, and ``sidechain``
    marks sub-agent side chains.
    """

    message: ChatMessage
    at: datetime | None = None
    meta: dict[str, Any] = msgspec.field(default_factory=dict)
    marker: str | None = None
    sidechain: bool = False
