"""Two writers of one session that pick a layer's handle (``L<k>``) at the same moment
cannot both store it: the later one is told under the session's lock, in the transaction
that would write its layer, and picks again. On SQLite and PostgreSQL, with two threads,
and over random interleavings of several writers."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph import (
    HANDLE_KEY,
    ConversationGraph,
    LayerHandleTaken,
    MemoryStore,
    layer_handle,
    next_layer_handle,
)


def _task(g: ConversationGraph, rounds: int) -> list[str]:
    """A user message and an answer per round; returns the user messages' ids."""
    ids = []
    for i in range(rounds):
        ids.append(g.append({"role": "user", "content": f"step {i}"}).id)
        g.append({"role": "assistant", "content": f"done {i}"})
    return ids


def _layer(g: ConversationGraph, node: str, handle: str) -> Any:
    said = [{"role": "user", "content": f"summary under {handle}"}]
    return g.add_layer("collapse", [node], said, meta={HANDLE_KEY: handle})


def _store_with_retry(g: ConversationGraph, node: str, handle: str) -> tuple[str, int]:
    """What a writer does: store with the handle it picked; when it was taken meanwhile,
    read the store again and pick the next. Returns the handle stored and the retries."""
    retries = 0
    while True:
        try:
            return layer_handle(_layer(g, node, handle)), retries
        except LayerHandleTaken:
            retries += 1
            g.refresh()
            handle = next_layer_handle(g.layers())


def _stored_handles(url: str) -> list[str]:
    return [layer_handle(i) for i in ConversationGraph.open(url, session="s").layers()]


def test_two_writers_that_picked_one_handle_cannot_both_store_it(store_url: str) -> None:
    first = ConversationGraph.open(store_url, session="s")
    nodes = _task(first, 4)
    second = ConversationGraph.open(store_url, session="s")
    picked = [next_layer_handle(g.layers()) for g in (first, second)]
    assert picked == ["L1", "L1"]  # each from its own view, before either stored
    _layer(first, nodes[0], picked[0])
    with pytest.raises(LayerHandleTaken, match="handle L1 is already held by layer"):
        _layer(second, nodes[2], picked[1])
    assert _stored_handles(store_url) == ["L1"]  # the refused layer wrote nothing
    second.refresh()
    assert layer_handle(_layer(second, nodes[2], next_layer_handle(second.layers()))) == "L2"
    assert _stored_handles(store_url) == ["L1", "L2"]


def test_two_threads_making_layers_at_once_store_distinct_handles(store_url: str) -> None:
    nodes = _task(ConversationGraph.open(store_url, session="s"), 4)
    picked = threading.Barrier(2, timeout=60)
    results: dict[int, tuple[str, int]] = {}
    errors: list[BaseException] = []

    def writer(index: int) -> None:
        try:
            g = ConversationGraph.open(store_url, session="s")
            handle = next_layer_handle(g.layers())
            picked.wait()  # both have picked before either stores
            results[index] = _store_with_retry(g, nodes[2 * index], handle)
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(results.values()) == [("L1", 0), ("L2", 1)]
    assert sorted(_stored_handles(store_url)) == ["L1", "L2"]


WRITERS = 3


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, WRITERS - 1), st.booleans()), max_size=30))
def test_interleaved_writers_never_store_one_handle_twice(
    steps: list[tuple[int, bool]],
) -> None:
    store = MemoryStore()
    nodes = _task(ConversationGraph(store, "s"), 30)
    writers = [ConversationGraph(store, "s") for _ in range(WRITERS)]
    picks: dict[int, str] = {}
    made = 0
    for who, store_now in steps:
        if who not in picks or not store_now:
            picks[who] = next_layer_handle(writers[who].layers())  # from a maybe stale view
            continue
        _store_with_retry(writers[who], nodes[made], picks.pop(who))
        made += 1
    handles = [layer_handle(i) for i in ConversationGraph(store, "s").layers()]
    assert len(handles) == made
    assert sorted(handles, key=lambda h: int(h[1:])) == [f"L{k}" for k in range(1, made + 1)]
