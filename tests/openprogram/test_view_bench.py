"""Benchmarks: `openprogram view` on a 100,000-node session with 1,000 LLM calls.

The session list and a session's first page (its timeline, paged) come from the session
table and the receipts alone, so a cold viewer answers them without loading the graph.
A layer over 99,988 nodes shows its originals a page at a time: the first view expands
and counts them all once (its totals), every page after is a slice.
Normal runs pass ``--benchmark-disable`` (each runs once, as a smoke test);
``pytest tests/openprogram/test_view_bench.py --benchmark-enable`` measures them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import graph
from context import ContextStorage, RenderReceipt, state_folder
from graph import ConversationGraph, SQLStore, new_id

# internal: the web view served in process to a test client
from openprogram._view import Viewer
from openprogram._view._app import COOKIE, create_app

# internal: the scale bench's synthetic messages as a fixture
from openprogram.bench._scale_steps import iter_messages

NODES = 100_000
CALLS = 1_000
TOKEN = "bench-token"
LAYER = "big-layer"


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = tmp_path_factory.mktemp("view-bench") / "big.db"
    g = ConversationGraph.open(path, session="big")
    with g.batch():
        ids = [g.append(message).id for message in iter_messages(NODES)]
    head = g.head
    summary = [{"role": "user", "content": "[summary of the whole session]"}]
    g.add_layer("collapse", ids[2:-10], summary, layer_id=LAYER)  # over 99,988 nodes
    g.close()
    store = SQLStore(path)
    storage = ContextStorage(store, "big", state_folder(store, None))
    for n in range(CALLS):
        receipt = RenderReceipt(
            id=new_id(), session="big", seq=n, head=head, frame=None, tools_digest="none",
            tool_tokens=400, budget=32_000, configured_budget=32_000,
            tokens=8_000 + (n * 97) % 24_000, messages=40, at=f"2026-01-01T00:{n % 60:02d}:00",
        )  # fmt: skip
        storage.save_receipt(receipt, [])
    store.close()
    graph.dispose_engines()
    yield str(path)
    graph.dispose_engines()


def _client(url: str) -> TestClient:
    viewer = Viewer(url, None)
    app = create_app(viewer, token=TOKEN, hosts={"127.0.0.1:8765"})
    client = TestClient(app, base_url="http://127.0.0.1:8765")
    client.cookies.set(COOKIE, TOKEN)
    return client


@pytest.mark.parametrize("path", ["/", "/s/big"])
def test_bench_view_first_page_of_a_100k_node_session(benchmark: Any, big: str, path: str) -> None:
    def run() -> Any:
        with _client(big) as client:  # a cold viewer: nothing loaded, nothing cached
            return client.get(path)

    response = benchmark.pedantic(run, rounds=3, iterations=1)
    assert response.status_code == 200
    if path == "/":
        assert "100,000" in response.text
    else:
        assert "1,000 LLM calls" in response.text and "page 1 of 20" in response.text
        assert response.text.count('class="bar"') == 50  # one page of calls, not all
    graph.dispose_engines()


def test_a_path_is_never_served_from_outside_the_state_folder(big: str, tmp_path: Path) -> None:
    with _client(big) as client:
        assert client.get("/files/../../../../etc/passwd").status_code == 404
        assert client.get("/files/%2e%2e/%2e%2e/etc/hostname").status_code == 404


def test_bench_view_a_page_of_a_layer_over_100k_nodes(benchmark: Any, big: str) -> None:
    """A page of the layer's originals on a viewer that has shown the layer once."""
    with _client(big) as client:
        first = client.get(f"/s/big/layer/{LAYER}")  # expands and counts the originals once
        assert first.status_code == 200 and "covers 99,988 nodes" in first.text
        assert len(first.text) < 200_000  # one page of originals, not 50 MB

        def run() -> Any:
            return client.get(f"/s/big/layer/{LAYER}", params={"page": 1000})

        response = benchmark.pedantic(run, rounds=5, iterations=1)
        assert response.status_code == 200 and "page 1,001 of" in response.text
    graph.dispose_engines()


def test_bench_view_a_layer_over_100k_nodes_first_seen(benchmark: Any, big: str) -> None:
    """The first view of the layer on a cold viewer (graph loaded, originals counted)."""

    def run() -> Any:
        with _client(big) as client:
            return client.get(f"/s/big/layer/{LAYER}")

    response = benchmark.pedantic(run, rounds=1, iterations=1)
    assert response.status_code == 200 and "page 1 of" in response.text
    graph.dispose_engines()
