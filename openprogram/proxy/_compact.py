"""OpenAI's ``/v1/responses/compact``, kept as a provider layer that rolls back locally.

The compact request passes through as the client sent it. What comes back (the user's
messages and one opaque ``compaction`` item standing for the rest) is kept as a layer of
kind ``provider`` over what it replaced in the session, as Anthropic's compaction is
(``context``'s provider tier): ``openprogram context`` and the viewer list it, and
``openprogram rollback`` takes it off.

The client then sends the compacted window in place of its history. The session holds
the original, so such a request is read as the original history followed by what is new
(the window is recognised by its compaction item); its render sends the compaction item
where the layer stands, and the originals again once the layer is rolled back.
"""

from __future__ import annotations

import json
from typing import TypedDict

from graph import LayerInfo
from openprogram._runtime._host import SessionHost
from openprogram.integrations._mirror import Mirror
from openprogram.proxy._bodies import Request
from openprogram.proxy._convert import Converted

__all__ = ["NAMESPACE", "Window", "adopt", "expand", "window"]

NAMESPACE = "proxy.compacted"
"""Store side-data namespace: the session's last compacted window (its compaction item,
the input it replaced, and the layer it became)."""


class Window(TypedDict):
    """A compacted window: the compaction item's encrypted content, the input it replaced,
    and the layer it became."""

    compaction: object
    input: str | list[object]
    layer: str


def adopt(
    session: SessionHost,
    mirror: Mirror,
    converted: Converted,
    items: list[object],
    given: str | list[object],
) -> tuple[LayerInfo | None, Window | None]:
    """Keep a compact answer's ``items`` as a layer over the history ``given`` (the compact
    request's input, as ``converted``), and the window that stands for it."""
    compaction = [i for i in items if isinstance(i, dict) and i.get("type") == "compaction"]
    if not compaction:
        return None, None
    mirror.sync(converted.entries, converted.system)
    layer = session.engine.provider_compaction(compaction, head=mirror.head, provider="openai")
    if layer is None:
        return None, None
    kept: Window = {"compaction": compaction[-1].get("encrypted_content"), "input": given,
                    "layer": layer.id}  # fmt: skip
    session.store.put_values(session.id, NAMESPACE, {"window": json.dumps(kept)})
    return layer, kept


def window(session: SessionHost) -> Window | None:
    """The session's last compacted window, if it has one."""
    stored = session.store.get_values(session.id, NAMESPACE).get("window")
    return json.loads(stored) if stored else None


def expand(body: Request, kept: Window | None) -> Request:
    """``body`` with a compacted window in its input read as the history it replaced."""
    items = body.get("input")
    if kept is None or not isinstance(items, list):
        return body
    for n, item in enumerate(items):
        if (
            isinstance(item, dict)
            and item.get("type") == "compaction"
            and item.get("encrypted_content") == kept["compaction"]
        ):
            return {**body, "input": [*kept["input"], *items[n + 1 :]]}
    return body
