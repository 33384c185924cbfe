"""``RenderRequest``: everything one render is decided from, besides the graph and the
stored decisions, frozen so that a preview of another budget or tool set (a receipt's) is
a request of its own rather than engine attributes patched and put back."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from graph import ToolSchema

from .._budget._anchor import UsageAnchor


@dataclass(frozen=True)
class RenderRequest:
    """What to render: from where, under which budget, with which tools, at what time."""

    head: str | None
    frame: str | None
    budget: int
    """The configured budget."""
    now: datetime
    anchor: UsageAnchor = field(compare=False)
    """How the provider's counts map onto ours (read only here: its ``inverse``)."""
    squeeze: float = 1.0
    """Share of ``budget`` a render may use (``recover`` lowers it after an overflow)."""
    tools: tuple[ToolSchema, ...] = ()
    tool_tokens: int = 0
    preview: bool = False
    """Decide without committing (previews decide on copies of the sticky state)."""

    @property
    def effective(self) -> int:
        """The budget the cascade works under, in our counts: squeezed, then mapped
        through the usage anchor, which may tighten it and never loosens it. A provider
        that reports fewer tokens than we count (another tokenizer, a usage that leaves
        out the tool schemas or the cached part) does not make a prompt over the budget
        by our count: the receipts, the bench and the adapters all check that count."""
        allowed = int(self.budget * self.squeeze)
        return max(1, min(allowed, self.anchor.inverse(allowed)))
