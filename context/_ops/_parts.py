"""The parts of an engine that keep what renders read and decided, made together.

Walks and built units (the renderer's layouts), tier state (the frames), pending layers
(the book), token counts (the cache), and the committer and layer operations that share
them: an engine makes them once, and again when a scrub rewrote the stored text they were
made from (their contents would otherwise go out in the next prompt).
"""

from __future__ import annotations

from typing import NamedTuple

from graph import ConversationGraph, GraphReader

from .._budget._policy import Policy
from .._budget._tokens import TokenCache, TokenCounter
from .._commit._committer import Committer
from .._commit._hooks import Hooks
from .._commit._writer import SessionWriter
from .._render._cascade import Cascade
from .._render._frame import FrameStore
from .._render._renderer import Renderer
from .._store._folder import StateFolder
from .._store._storage import ContextStorage
from .._summaries._prefetch import Prefetcher
from .._summaries._summary import Summarizer
from .._tiers._book import LayerBook
from .._tiers._tier import Tier
from ._layer_ops import LayerOps


class EngineParts(NamedTuple):
    frames: FrameStore
    renderer: Renderer
    committer: Committer
    ops: LayerOps


class Shared(NamedTuple):
    """What the parts take from the engine and keep across a remaking."""

    policy: Policy
    storage: ContextStorage | None
    folder: StateFolder
    counter: TokenCounter
    hooks: Hooks
    state_key: str
    tiers: list[Tier]


def engine_parts(
    graph: GraphReader,
    shared: Shared,
    writer: SessionWriter | None,
    summarizer: Summarizer,
    prefetch: Prefetcher | None,
) -> EngineParts:
    """Fresh parts over ``graph``: nothing of an earlier render is in them."""
    policy, storage, folder, counter = shared.policy, shared.storage, shared.folder, shared.counter
    live = graph if isinstance(graph, ConversationGraph) else None
    book = LayerBook(
        graph,
        refresh=None if live is None else live.refresh,
        session_of=None if live is None else live.store.session_of,
    )
    cache = TokenCache()
    frames = FrameStore(graph, storage, shared.state_key, shared.tiers)
    cascade = Cascade(shared.tiers, policy, counter)
    renderer = Renderer(
        graph, policy, cascade, book, frames, counter, cache, summarizer, prefetch, folder, storage
    )
    committer = Committer(
        graph,
        policy,
        writer,
        storage,
        folder,
        book,
        frames,
        cache,
        counter.encoding_name,
        shared.hooks,
    )
    if storage is not None:
        encoding = counter.encoding_name
        cache.loader = lambda keys: storage.load_tokens(encoding, keys)
    return EngineParts(frames, renderer, committer, LayerOps(graph, book, renderer, committer))
