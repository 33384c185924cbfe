"""One element of a framework's history as an OpenAI chat message (:class:`Entry`), and a
rendered message paired with the entry it shows unchanged (:class:`Paired`)."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from graph import ChatMessage
from openprogram.integrations._calls import call_ids, text_ids

__all__ = ["Entry", "Paired", "other_ids"]

_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str)
"""What an entry's digest is taken of (``json.dumps`` with options builds one per call)."""


@dataclass(frozen=True)
class Entry:
    """One element of a framework's history as an OpenAI chat message.

    ``message`` carries the framework's own tool call ids; ``original`` is the framework's
    object (returned as is while compaction leaves it alone); ``meta`` goes into the node's
    meta (the framework's ids, usage, model); ``label`` names it in an error.
    """

    message: ChatMessage
    original: Any = None
    meta: dict[str, Any] = field(default_factory=dict)
    label: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", text_ids(self.message))

    @functools.cached_property
    def digest(self) -> str:
        """What the index knows this entry by (kept: an adapter that reuses its entries
        across calls, as the proxy does, pays for it once)."""
        return hashlib.sha256(_ENCODER.encode(self.message).encode()).hexdigest()[:32]


class Paired(NamedTuple):
    """A rendered message (with the framework's call ids) and the entry it shows unchanged,
    or ``None`` when compaction changed or made it (a summary, a cleared output, a note);
    a system message without an entry is the instructions the request goes out with.
    (A named tuple: a render's thousand pairs are made in C when only their entries are
    other objects.)"""

    message: ChatMessage
    entry: Entry | None
    layer: str | None = None
    """The layer whose summary it shows (a compaction's or a collapse's), if any."""


def other_ids(sent: ChatMessage, shown: ChatMessage) -> bool:
    """Whether a message goes out with other call ids than the entry it shows."""
    if sent.get("role") != "tool" and not sent.get("tool_calls") and not shown.get("tool_calls"):
        return False
    return call_ids(sent) != call_ids(shown)
