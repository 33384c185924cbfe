"""What an engine keeps for one frame between renders.

Tier state is saved per configuration epoch (the state key) and frame; the main frame's
state also carries the layout checkpoint (``_checkpoint``), so a fresh engine builds only
the units that a persisted layer does not hide. ``FrameStore`` reads that state; only the
committer writes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from graph import GraphReader

from .._store._storage import ContextStorage
from .._tiers._book import LayerBook
from .._tiers._offload import mark_failed
from .._tiers._tier import Tier, TierState
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


class FrameStore:
    """Each frame's state, loaded from storage on first use and kept between renders."""

    def __init__(
        self,
        graph: GraphReader,
        storage: ContextStorage | None,
        state_key: str,
        tiers: Sequence[Tier],
    ) -> None:
        self.graph = graph
        self.storage = storage
        self.state_key = state_key
        """The configuration epoch the state is kept under (see ``ContextEngine``)."""
        self.tiers = tuple(tiers)
        self.by_key: dict[str | None, Frame] = {}

    def key(self, frame: str | None) -> str:
        """The storage key of a frame's state."""
        return f"{self.state_key}:{frame or '-'}"

    def get(self, frame: str | None) -> Frame:
        found = self.by_key.get(frame)
        if found is not None:
            return found
        found = self.by_key[frame] = Frame()
        if self.storage is not None:
            saved = self.storage.load_state(self.key(frame))
            if saved:
                found.saved = saved.encode()
                found.states = self.states(found.saved)
                raw = msgspec.json.decode(saved)
                if frame is None and LAYOUT in raw:
                    try:
                        found.restore = msgspec.convert(raw[LAYOUT], Checkpoint)
                    except msgspec.ValidationError:  # an older shape: walk in full
                        found.restore = None
                    found.checkpoint = found.restore
        return found

    def states(self, saved: bytes) -> dict[str, TierState]:
        """Tier states as saved (what a refused commit goes back to)."""
        if not saved:
            return {}
        raw = msgspec.json.decode(saved)
        return {
            tier.name: msgspec.convert(raw[tier.name], tier.state)
            for tier in self.tiers
            if tier.name in raw
        }

    @staticmethod
    def encode(frame: Frame) -> bytes:
        """A frame's tier state and checkpoint as stored (keys sorted: byte-stable)."""
        values = {name: msgspec.to_builtins(value) for name, value in frame.states.items()}
        if frame.checkpoint is not None:
            values[LAYOUT] = msgspec.to_builtins(frame.checkpoint)
        return msgspec.json.encode(dict(sorted(values.items())))

    def reset(self, frame: Frame, book: LayerBook) -> None:
        """Back to what is stored: after a refused commit, tier state since the last
        commit is dropped and a layout hidden under a layer never stored starts afresh."""
        self.unhide(frame, book)
        frame.states = self.states(frame.saved)
        frame.scratch = {}
        frame.captured = ()

    def unhide(self, frame: Frame, book: LayerBook) -> None:
        """A layout whose hidden span stands under a layer that was never stored (a
        preview's, a refused commit's) starts afresh: the next render decides it again."""
        hidden = frame.layout.hidden
        known = hidden is None or hidden.layer in self.graph.state.layers
        if not known and hidden is not None and hidden.layer not in book.overlay:
            frame.layout = Layout()

    @staticmethod
    def keep_inline(frame: Frame, node_ids: Sequence[str]) -> None:
        """Before deciding again: outputs whose file could not be written stay inline."""
        for node_id in node_ids:
            mark_failed(frame.states, node_id)
