"""``MessageSource``: where one message of a prompt came from, said by the render that made it.

Consumers (the viewer, ``context``, the bench, the adapters) read a message's origin here
instead of from its wording: a placeholder's or a note's text may change, its source does
not. A receipt keeps the sources of the prompt it sent.
"""

from __future__ import annotations

import msgspec

from .._view import UnitKind, Variant

SourceTier = str
"""The tier that made a message what it is: a registry tier (``offload``, ``snip``…), a
layer's kind (``collapse``, ``compact``, ``provider``), ``integrity`` for a turn the
provider's rules added, ``request`` for the current request cut to its share; None for a
node shown as stored."""


class MessageSource(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One prompt message's provenance (untracked by the cyclic collector: it holds only
    strings, numbers and a tuple of strings, and a render makes one per message)."""

    nodes: tuple[str, ...] = ()
    """The node it shows (a layer's messages name ``layer`` instead, whose covers are
    their nodes; a note or stub for dropped units names none)."""
    variant: Variant | None = None
    """How its node is shown (the token cache's key part); None for a turn no node backs."""
    unit: UnitKind | None = None
    """The kind of unit it belongs to (``note``, ``stub`` and ``layer`` stand for others)."""
    layer: str | None = None
    """The layer it shows, if any."""
    tier: SourceTier | None = None
    current: bool = False
    """Whether it is the request being worked on (the newest user message, or the task)."""
    render: str = ""
    """The render that made it (the id its receipt and records carry)."""
    merged: int = 1
    """How many messages a provider's role rules merged into this one."""

    @property
    def placeholder(self) -> bool:
        """Whether it stands in for more than it shows: a node cut down, cleared or moved
        out, a note for dropped rounds (a layer's summary is not counted here)."""
        return self.variant in PLACEHOLDERS

    @property
    def verbatim(self) -> bool:
        """Whether the message is its one node's own, unchanged (no tier rewrote it, no
        role rule merged it with another)."""
        return self.variant in VERBATIM and self.merged == 1 and len(self.nodes) == 1


VERBATIM: frozenset[Variant | None] = frozenset(
    {
        "full",
        "pending",
        "call",
        "result:running",
        "result:completed",
        "result:error",
        "result:interrupted",
        "edit-cleared",
    }
)
"""Variants whose message is its node's own, unchanged (a context edit clears an output at
the provider: the message sent is the stored one)."""

PLACEHOLDERS: frozenset[Variant | None] = frozenset(
    {
        "offloaded",
        "reduced",
        "cleared",
        "edit-cleared",
        "edit-placeholder",
        "superseded",
        "cut",
        "stub",
        "note",
    }
)
"""Variants that show less than their node (or stand for dropped units)."""
