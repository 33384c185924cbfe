"""``Decision``: what one render decided, before its commit writes it."""

from __future__ import annotations

from dataclasses import dataclass, field

from msgspec.structs import replace

from graph import ChatMessage, LayerInfo

from .._store._source import MessageSource
from .._tiers._tier import TierContext
from .._view import View
from ._frame import Frame
from ._rendered import Rendered
from ._request import RenderRequest


@dataclass(frozen=True)
class Decision:
    """One render's outcome before its commit: the prompt, the layers it made and what it
    was decided under (``ctx`` holds the tier state, records, files and edits)."""

    request: RenderRequest
    ctx: TierContext
    view: View
    frame: Frame
    messages: list[ChatMessage]
    tokens: int
    layers: tuple[LayerInfo, ...] = ()
    """The layers it made, not stored yet (the commit stores them)."""
    problems: list[str] = field(default_factory=list)
    """What went wrong on the way and did not stop the render (said in its actions)."""
    sources: list[MessageSource] = field(default_factory=list)
    """Where each of ``messages`` came from, with no render named (as a receipt keeps
    them; ``rendered`` names the render in the sources the caller gets)."""

    @property
    def key(self) -> str | None:
        """The frame rendered in (None: the main conversation)."""
        return self.request.frame

    def rendered(self) -> Rendered:
        """The prompt as the caller gets it, with what the cascade did for it."""
        ctx, view = self.ctx, self.view
        for problem in self.problems:
            ctx.act(ctx.tier or "render", problem, view, view, error=problem)
        system = sum(u.tokens for u in view.units if u.kind == "system")
        return Rendered(
            messages=self.messages,
            tokens=self.tokens,
            budget=self.request.budget,
            actions=ctx.actions,
            records=ctx.records,
            context_management={"edits": ctx.edits} if ctx.edits else None,
            preview=self.request.preview,
            floor=view.extra_tokens + system,
            id=ctx.decisions.render,
            sources=stamped(self.sources, ctx.decisions.render),
            summary=ctx.decisions.summary,
        )


def stamped(sources: list[MessageSource], render: str) -> list[MessageSource]:
    """``sources`` naming ``render`` (a copy of each: a source is immutable)."""
    if not render:
        return list(sources)
    return [replace(source, render=render) for source in sources]
