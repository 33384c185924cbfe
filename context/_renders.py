"""Renders outside an engine's turn loop: once, with no memory of earlier renders, and
again from a stored receipt, as a preview (apart from the engine, which they only use)."""

from __future__ import annotations

from typing import Any

import msgspec

from graph import GraphReader

from ._budget._anchor import UsageAnchor
from ._budget._policy import Policy
from ._engine import ContextEngine
from ._render._rendered import Rendered
from ._render._request import RenderRequest
from ._store._receipt import RenderReceipt


def render_context(
    graph: GraphReader,
    *,
    budget: int | None = None,
    policy: Policy | None = None,
    head: str | None = None,
    frame: str | None = None,
    summarizer: Any = None,
) -> Rendered:
    """Render once, with no memory of earlier renders (see ``ContextEngine`` for a loop).

    >>> from graph import ConversationGraph
    >>> g = ConversationGraph.memory()
    >>> _ = g.append({"role": "user", "content": "hello"})
    >>> render_context(g, budget=500).messages
    [{'role': 'user', 'content': 'hello'}]
    """
    engine = ContextEngine(graph, policy, summarizer, budget)
    return engine.render(head=head, frame=frame)


def render_receipt(engine: ContextEngine, receipt: RenderReceipt) -> Rendered:
    """The prompt a receipt describes, rendered again as a preview (nothing is written):
    from its head and frame, with its tool schemas, its configured budget squeezed to the
    effective one, and the usage anchor of then."""
    stored = engine.storage.tools(receipt.tools_digest) if engine.storage else None
    tools = tuple(stored) if stored is not None else tuple(engine.tools)
    with engine.lock:
        engine._after_scrub()
        request = RenderRequest(
            receipt.head,
            receipt.frame,
            receipt.configured_budget,
            engine.clock(),
            UsageAnchor.from_state(receipt.anchor) if receipt.anchor else engine.anchor,
            squeeze=(receipt.budget + 0.5) / receipt.configured_budget,
            tools=tools,
            tool_tokens=engine.counter.count_tools(list(tools))
            if stored is not None
            else engine.tool_tokens,
            preview=True,
        )
        rendered = engine.renderer.decide(request).rendered()
    return msgspec.structs.replace(rendered, budget=receipt.budget)
