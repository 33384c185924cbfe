"""A prompt-cache breakpoint after the summary layers (Anthropic's ``cache_control``).

A summary layer stays as it is until the next compaction or a rollback, so the prompt up
to the last one is a prefix the provider can read from its cache, turn after turn, even
when the client's own breakpoints sit elsewhere. One mark goes on the last block of the
last message that shows a layer, only while the request holds fewer than
:data:`MAX_BREAKPOINTS` marks after the client's own (which are never taken off for it),
and never on a block of the client's: a layer's blocks are built by the proxy.
"""

from __future__ import annotations

from openprogram._json import objects
from openprogram._messages import AnthropicBlock
from openprogram.proxy._bodies import Request

__all__ = ["EPHEMERAL", "MAX_BREAKPOINTS", "count_breakpoints", "mark_after"]

MAX_BREAKPOINTS = 4
"""Anthropic refuses a request with more ``cache_control`` breakpoints than this."""
EPHEMERAL = {"type": "ephemeral"}


def count_breakpoints(request: Request) -> int:
    """The ``cache_control`` marks of ``request``: system, tools and message blocks."""
    blocks = objects(request.get("system")) + objects(request.get("tools"))
    for message in objects(request.get("messages")):
        blocks += objects(message.get("content"))
    return sum("cache_control" in block for block in blocks)


def mark_after(
    request: Request, block: AnthropicBlock | None, *, marks: int | None = None, at: int = -1
) -> bool:
    """Mark ``block`` (the last block of the last layer's message, found by identity in
    ``request``'s messages, in message ``at`` if it is given) as a breakpoint when there is
    room (``marks``: the request's, when they are known); whether it was marked."""
    if block is None or "cache_control" in block:
        return False
    if (count_breakpoints(request) if marks is None else marks) >= MAX_BREAKPOINTS:
        return False
    messages = request["messages"]
    for message in [messages[at]] if 0 <= at < len(messages) else reversed(messages):
        if not isinstance(message, dict) or not isinstance(content := message["content"], list):
            continue
        for n, candidate in enumerate(content):
            if candidate is block:
                marked = {**block, "cache_control": dict(EPHEMERAL)}
                message["content"] = [*content[:n], marked, *content[n + 1 :]]
                return True
    return False
