"""``Decision``: what one render decided, before its commit writes it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._tiers._tier import TierContext
from .._view import View
from ._frame import Frame


@dataclass
class Decision:
    """One render's outcome before its commit: the prompt and what it was decided under
    (``ctx`` holds the records and files; the engine's layer book the new layers)."""

    ctx: TierContext
    view: View
    frame: Frame
    key: str | None
    """The frame rendered in (None: the main conversation)."""
    messages: list[dict[str, Any]]
    tokens: int
    problems: list[str] = field(default_factory=list)
    """What went wrong on the way and did not stop the render (said in its actions)."""
