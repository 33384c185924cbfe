"""What an engine keeps for one frame between renders, and how a walked node is first shown."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graph import Node

from .._tiers._tier import TierState
from ._checkpoint import Checkpoint
from ._layout import Layout

LAYOUT = "~layout"
"""Key of the layout checkpoint in a frame's saved state (no tier has that name)."""


@dataclass
class Frame:
    """What an engine keeps for one frame between renders."""

    layout: Layout = field(default_factory=Layout)
    states: dict[str, TierState] = field(default_factory=dict)
    scratch: dict[str, dict[str, Any]] = field(default_factory=dict)
    saved: bytes = b""
    checkpoint: Checkpoint | None = None
    """Where a fresh engine may start its layout (saved with the tier state)."""
    restore: Checkpoint | None = None
    """The checkpoint loaded with the state, offered to the layout's first walk."""
    captured: tuple[object, ...] = ()


def variant_of(message: dict[str, Any], node: Node) -> str:
    """How a walked node is shown before any tier acts (part of its token-count key)."""
    if node.kind == "tool":
        return "full" if node.result is not None else "pending"
    if node.kind == "function":
        return "call" if message.get("role") == "assistant" else f"result:{node.status}"
    return "full"
