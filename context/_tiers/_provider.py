"""Provider-side compaction as one more tier: the provider summarizes, we keep it a layer.

Anthropic can compact on its side: with a ``compact_20260112`` context edit, a reply may
start with a ``compaction`` block that stands for everything before it. A policy may hand
compaction over (``provider_compaction="anthropic"``); the block that comes back is stored
as a layer over the nodes the provider replaced, so later calls send it in their place,
``layers()`` lists it, and a rollback sends the originals again. No local summarizer is
asked; the record says what the provider did. (OpenAI's Responses compaction returns an
opaque item only its Responses API reads back; chat completions, which we call, cannot
carry it, so it is not offered.)
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from graph import ChatMessage, LayerInfo, new_id

from .._budget._names import LayerKind
from .._view import Unit, View
from ._summarizing import make_layer, record_layer
from ._tier import TierContext

PROVIDER_KIND: LayerKind = "provider"


def request_options(policy: Any, budget: int, edits: dict[str, Any] | None) -> dict[str, Any]:
    """The ``context_management`` a request carries when compaction is handed over
    (merged with any cache edits microcompact asked for)."""
    if policy.provider_compaction != "anthropic":
        return {}
    threshold = policy.provider_compact_tokens or int(budget * policy.low_water)
    kept = list((edits or {}).get("edits", []))
    compact = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": threshold}}
    return {"context_management": {"edits": [*kept, compact]}}


def readable(items: Sequence[Mapping[str, object]]) -> str:
    """What a person sees of the items: the summary text (an opaque item says only that it
    is there)."""
    texts = [str(i.get("content") or "") for i in items if isinstance(i.get("content"), str)]
    text = "\n\n".join(t for t in texts if t.strip())
    return text or f"[{len(items)} compaction item(s) from the provider; the content is opaque]"


def covered_run(view: View) -> list[Unit]:
    """The units a provider compaction replaced: the adjacent run after the pinned prefix,
    up to anything running or the question being answered (the provider summarized those
    too, but they stay: a layer covers whole units, and the reply will join that one)."""
    run: list[Unit] = []
    for unit in view.units:
        if unit.pinned and unit.kind != "layer":
            if run:
                break
            continue
        if unit.running:
            break
        run.append(unit)
    while run and all(item.message.get("role") == "user" for item in run[-1].items):
        run.pop()  # the question being answered: its reply joins it in one round
    return run


def provider_layer(
    ctx: TierContext, view: View, items: Sequence[Mapping[str, object]], provider: str
) -> tuple[View, LayerInfo | None]:
    """Store the provider's compaction as a layer over what it replaced (and record it)."""
    started = time.perf_counter()
    covered = covered_run(view)
    if not covered or ctx.layers is None:
        return view, None
    text = readable(items)
    message: ChatMessage = {
        "role": "assistant",
        # Anthropic's block is the summary; sending its text again would pay for it twice
        "content": None if provider == "anthropic" else text,
        "provider_specific_fields": {"compaction_blocks": items},
    }
    meta = {"provider": provider, "items": len(items), "reason": "provider"}
    after, info = make_layer(view, ctx, PROVIDER_KIND, covered, [message], None, meta, new_id())
    ctx.act(
        "provider", f"{provider} compacted {len(covered)} unit(s) into layer {info.id}", view, after
    )
    details = {"layer": info.id, "provider": provider, "items": len(items)}
    record_layer(
        ctx, "provider", view, after, covered, None, text, started=started, ms=0.0, details=details
    )
    return after, info
