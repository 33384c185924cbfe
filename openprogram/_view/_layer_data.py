"""A layer as the viewer shows it: its originals a page at a time and their totals, without
expanding and counting every covered message on a request.

A page of originals is built from that page's covered nodes alone. The totals (tokens and
messages in full) are the ones the layer's maker kept in its meta (``context.LAYER_TOTALS``,
written when the layer is made); a layer made before they were kept, or by a tier that only
estimates (the backlog of a long imported session), is counted once on a thread of its own
while its page says so, and kept for the viewer's life: a layer never changes, so neither do
its totals.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from context import LAYER_TOTALS, TokenCounter
from graph import ChatMessage, GraphReader, LayerInfo, Step, steps_to_messages

CHUNK = 200
"""Entries counted at a time in the background (a few milliseconds of work)."""


@dataclass(frozen=True)
class Totals:
    """A layer's originals in full: their messages and their tokens."""

    tokens: int
    messages: int


def stored_totals(info: LayerInfo, counter: TokenCounter) -> Totals | None:
    """The totals the layer's maker kept, if counted the way ``counter`` counts."""
    kept = info.layer.meta.get(LAYER_TOTALS)
    if not isinstance(kept, dict):
        return None
    if kept.get("encoding") != counter.encoding_name or kept.get("as_sent") != counter.as_sent:
        return None
    tokens, messages = kept.get("tokens"), kept.get("messages")
    if not isinstance(tokens, int) or not isinstance(messages, int):
        return None
    return Totals(tokens, messages)


class Originals:
    """One layer's covered nodes as pages: each entry a covered message or function call
    (an assistant's covered tool results with it), in the order they were stored."""

    def __init__(self, graph: GraphReader, info: LayerInfo) -> None:
        self.graph = graph
        self.covered = frozenset(info.covers)
        self.starts = [
            node_id
            for node_id in info.covers
            if node_id in graph and graph.get(node_id).kind in ("dialogue", "function")
        ]

    def messages(self, first: int, size: int) -> list[ChatMessage]:
        """The messages of entries ``first`` to ``first + size``."""
        steps: list[Step] = []
        for node_id in self.starts[first : first + size]:
            node = self.graph.get(node_id)
            if node.kind == "function":
                steps.append(Step(node, "call", 0, False))
                continue
            steps.append(Step(node, "message", 0, False))
            tools = self.graph.tools(node_id)
            steps.extend(Step(t, "tool", 0, False) for t in tools if t.id in self.covered)
        return steps_to_messages(steps)


class LayerTotals:
    """Totals of layers whose maker kept none, each counted once in the background: a
    chunk of entries at a time under the viewer's lock, so a request waits for one chunk
    at most and the count waits while a request runs."""

    def __init__(self, lock: threading.RLock) -> None:
        self._viewer_lock = lock
        self._lock = threading.Lock()
        self._found: dict[tuple[str, str], Totals] = {}
        self._counting: dict[tuple[str, str], threading.Thread] = {}

    def get(
        self,
        session: str,
        info: LayerInfo,
        originals: Originals,
        counter: TokenCounter,
        *,
        start: bool = True,
    ) -> Totals | None:
        """The layer's totals; None while they are being counted (started here, once;
        ``start`` False: not started, as a static export that shows none wants)."""
        stored = stored_totals(info, counter)
        if stored is not None:
            return stored
        key = (session, info.id)
        with self._lock:
            if key in self._found:
                return self._found[key]
            thread = self._counting.get(key)
            if thread is None and start:
                thread = threading.Thread(
                    target=self._count,
                    args=(key, originals, counter),
                    name=f"count layer {info.id}",
                    daemon=True,
                )
                self._counting[key] = thread
                thread.start()
        return None

    def _count(self, key: tuple[str, str], originals: Originals, counter: TokenCounter) -> None:
        tokens = messages = 0
        try:
            for first in range(0, len(originals.starts), CHUNK):
                with self._viewer_lock:
                    chunk = originals.messages(first, CHUNK)
                    tokens += counter.count_messages(chunk)
                    messages += len(chunk)
                time.sleep(0)  # a request waiting for the lock takes it now
        except Exception:  # a node scrubbed meanwhile: counted again on the next view
            with self._lock:
                self._counting.pop(key, None)
            return
        with self._lock:
            self._found[key] = Totals(tokens, messages)
            self._counting.pop(key, None)

    def join(self, timeout: float | None = None) -> None:
        """Wait for the counts running now (tests, and a viewer shutting down)."""
        with self._lock:
            threads = list(self._counting.values())
        for thread in threads:
            thread.join(timeout)
