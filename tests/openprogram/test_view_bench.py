"""Benchmarks: `openprogram view` on a 100,000-node session (issue 35, item 5).

The session is what an agent leaves: 100,000 messages (the scale bench's), then 120 LLM
calls through ``Session`` with the test model, so every receipt keeps its prompt as sent
and the first render folded the backlog into one layer over 99,941 nodes, made by a tier
that only estimates (no totals kept: the viewer counts them once in the background).

Each page is timed as a user meets it the first time: a fresh viewer holding what serving
the timeline loads in the background (the session's graph, its nodes' text for search;
loading 100,000 nodes is the graph's cost, timed on its own below) and nothing else — no
receipt decoded, no message counted, no layer indexed. The session list
and a session's timeline never load the graph. ``view --html`` is timed end to end, and
its pages are opened in headless Chromium.
Normal runs pass ``--benchmark-disable`` (each runs once, as a smoke test);
``pytest tests/openprogram/test_view_bench.py --benchmark-enable`` measures them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import graph
from graph import ConversationGraph
from openprogram import Session
from openprogram.bench import iter_messages
from openprogram.cli import main
from openprogram.testing import TestModel
from openprogram.view import COOKIE, Viewer, create_app
from tests.openprogram._browser import chromium

NODES = 100_000
CALLS = 120
TOKEN = "bench-token"
HOST = "127.0.0.1:8765"


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    path = tmp_path_factory.mktemp("view-bench") / "big.db"
    g = ConversationGraph.open(path, session="big")
    with g.batch():
        for message in iter_messages(NODES):
            g.append(message)
    g.close()
    with Session(str(path), "big", model=TestModel(default="ok"), budget=32_000) as session:
        for n in range(CALLS):
            session.llm(f"go on with step {n}")
        layer = session.graph.layers()[0].id
    graph.dispose_engines()
    viewer = Viewer(str(path))
    viewer.prefetch("big")  # as serving the timeline does: the graph, what search reads
    for thread in list(viewer._prefetching.values()):  # internal: the load's thread
        thread.join()
    yield {"path": str(path), "layer": layer, "viewer": viewer}
    graph.dispose_engines()


def _client(viewer: Viewer) -> TestClient:
    app = create_app(viewer, token=TOKEN, hosts={HOST})
    client = TestClient(app, base_url=f"http://{HOST}")
    client.cookies.set(COOKIE, TOKEN)
    return client


def _fresh(big: dict[str, Any]) -> Viewer:
    """A new viewer handed what the background load leaves (the session's graph and
    engine, its nodes' text for search), nothing else."""
    viewer = Viewer(big["path"], None)
    loaded: Viewer = big["viewer"]
    viewer._loaded = dict(loaded._loaded)  # internal: only the background load is shared
    viewer._search._texts = dict(loaded._search._texts)
    return viewer


PAGES = {
    "timeline": "/s/big",
    "stack by kind": "/s/big?kinds=1",
    "last prompt": "/s/big/prompt",
    "layers": "/s/big/layers",
    "layer": "/s/big/layer/{layer}",
    "layer page 1,000": "/s/big/layer/{layer}?page=1000",
    "search": "/s/big/search?q=module_3.py",
    "nodes page 1,000": "/s/big/nodes?page=1000",
}


@pytest.mark.parametrize("name", list(PAGES))
def test_bench_view_every_page_of_a_100k_node_session(
    benchmark: Any, big: dict[str, Any], name: str
) -> None:
    path = PAGES[name].format(layer=big["layer"])
    viewers: list[Viewer] = []

    def fresh() -> tuple[tuple[TestClient], dict[str, Any]]:
        viewers.append(_fresh(big))
        return (_client(viewers[-1]),), {}

    def run(client: TestClient) -> Any:
        with client:
            return client.get(path)

    response = benchmark.pedantic(run, setup=fresh, rounds=3, iterations=1)
    assert response.status_code == 200, response.text[:300]
    text = response.text
    assert len(text) < 300_000  # one page, not the session
    if name == "stack by kind":
        assert text.count('class="bar"') == 50 and "kinds-note" not in text
    if name.startswith("layer "):
        assert "page 1,001 of" in text and "covers 99,941 nodes" in text
    if name == "layer":
        assert "counting</b> the originals' tokens" in text  # made by the backlog: no totals
    if name == "search":
        hits = re.findall(r'<td class="shown">(.*?)</td>', text)
        assert len(hits) == 50 and any(h.startswith("under layer") for h in hits)
    for viewer in viewers:
        viewer.totals.join()


def test_bench_view_a_layers_totals_counted_in_the_background(
    benchmark: Any, big: dict[str, Any]
) -> None:
    """The backlog's layer kept no totals: its first page is served at once and says so;
    counted once in the background, every page after shows them."""
    viewer = _fresh(big)
    at = f"/s/big/layer/{big['layer']}"
    with _client(viewer) as client:
        assert "counting</b>" in client.get(at).text

        def counted() -> None:
            viewer.totals.join()

        benchmark.pedantic(counted, rounds=1, iterations=1)
        text = client.get(at, params={"page": 3}).text
    saved = re.search(r"<b id='saved'>([\d,.]+M?)</b> tokens saved", text)
    shown = re.search(r"\(([\d,.]+M?) in the ([\d,]+) original messages", text)
    assert saved is not None and shown is not None
    assert shown.group(2) == "99,941"
    graph.dispose_engines()


def test_bench_view_loading_a_100k_node_session(benchmark: Any, big: dict[str, Any]) -> None:
    """The graph's own cost: a cold viewer's first page that needs it."""

    def run() -> Any:
        with _client(Viewer(big["path"], None)) as client:
            return client.get("/s/big/layers")

    response = benchmark.pedantic(run, rounds=1, iterations=1)
    assert response.status_code == 200 and big["layer"] in response.text
    graph.dispose_engines()


def _settled(viewers: list[Viewer]) -> None:
    """Wait for the graph loads the timelines started (not part of what is timed)."""
    for viewer in viewers:
        for thread in list(viewer._prefetching.values()):  # internal: the load's thread
            thread.join()


@pytest.mark.parametrize("path", ["/", "/s/big"])
def test_bench_view_first_page_of_a_100k_node_session(
    benchmark: Any, big: dict[str, Any], path: str
) -> None:
    """A cold viewer: the session list and the timeline load no graph (the timeline starts
    loading it once it is sent)."""
    viewers: list[Viewer] = []

    def cold() -> tuple[tuple[TestClient], dict[str, Any]]:
        _settled(viewers)
        viewers.append(Viewer(big["path"], None))
        return (_client(viewers[-1]),), {}

    def run(client: TestClient) -> Any:
        with client:
            return client.get(path)

    response = benchmark.pedantic(run, setup=cold, rounds=3, iterations=1)
    _settled(viewers)
    assert response.status_code == 200
    if path == "/":
        assert re.search(r"100,\d{3}</td>", response.text)
    else:
        assert f"{CALLS} LLM calls" in response.text and "page 1 of 3" in response.text
        assert "big" in viewers[-1]._loaded  # internal: loaded once the page was sent
    graph.dispose_engines()


def test_a_path_is_never_served_from_outside_the_state_folder(big: dict[str, Any]) -> None:
    with _client(Viewer(big["path"], None)) as client:
        assert client.get("/files/../../../../etc/passwd").status_code == 404
        assert client.get("/files/%2e%2e/%2e%2e/etc/hostname").status_code == 404
    graph.dispose_engines()


@pytest.fixture(scope="module")
def exported(big: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("view-export") / "report.html"


def test_bench_view_html_of_a_100k_node_session(
    benchmark: Any, big: dict[str, Any], exported: Path
) -> None:
    def run() -> int:
        return main(["view", "--db", big["path"], "--html", str(exported)])

    assert benchmark.pedantic(run, rounds=1, iterations=1) == 0
    folder = exported.with_name("report_files")
    sizes = [p.stat().st_size for p in folder.iterdir()]
    assert len(sizes) > 2_000  # every page a file: 2,002 pages of nodes alone
    assert max(sizes) < 1_000_000  # none of them the whole session
    graph.dispose_engines()


def test_the_html_of_a_100k_node_session_pages_in_a_browser(
    big: dict[str, Any], exported: Path
) -> None:
    """The export opened as a user opens it: the list, the session, its layer paged to
    the last page written, the node list, and a prompt, in headless Chromium."""
    if not exported.exists():
        assert main(["view", "--db", big["path"], "--html", str(exported)]) == 0
    with chromium() as browser:
        tab = browser.new_page()
        tab.goto(exported.as_uri())
        tab.locator("#sessions tr[data-id='big'] a").click()
        tab.wait_for_selector(f"text=Timeline: {CALLS} LLM calls")
        tab.locator("nav.tabs a", has_text="layers").click()
        tab.locator(f"#layers a[href*='{big['layer']}']").click()
        said = re.search(r"page 1 of ([\d,]+)", tab.locator(".pager").first.inner_text())
        assert said is not None
        pages = int(said.group(1).replace(",", ""))
        for page in range(2, 21):
            tab.locator(".pager a", has_text="next →").first.click()
            tab.wait_for_selector(f"text=page {page} of {said.group(1)}")
        last = tab.locator(".pager").first.inner_text()
        assert f"`openprogram view` pages the other {pages - 20:,}" in last
        assert "next →" not in last
        tab.locator("nav.tabs a", has_text="nodes").click()
        tab.wait_for_selector("text=page 1 of 2,00")
        tab.locator(".pager a", has_text="next →").first.click()
        node = tab.locator("#nodes tbody tr a").first
        node.click()
        assert tab.locator("#nodes").is_visible()  # a long session's node opens its list page
        tab.locator("nav.tabs a", has_text="last prompt").click()
        tab.locator("text=the last call").click()
        assert tab.locator("#messages tbody tr").count() > 10
