"""``openprogram view --html OUT``: the viewer's pages in one static, self-contained file
(no script, no outside resource) to attach to a bug report. Each view is a section; links
are anchors, and CSS shows the section the address names (the session list by default)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from openprogram._view import _layer_pages as layer_pages
from openprogram._view import _pages as pages
from openprogram._view._data import Viewer
from openprogram._view._svg import figure

CALLS = 200
"""Calls whose prompts are written out, per session (the newest ones)."""
NODES = 2_000
"""Sessions up to this many nodes get a section per node; longer ones link to none."""

EXTRA_STYLE = """
section.view{display:none}section.view:target{display:block}
main:not(:has(section.view:target)) #index{display:block}
"""


def _anchor(*parts: str) -> str:
    return "#" + "-".join(p.replace(" ", "_") for p in parts)


class ExportLinks(pages.Links):
    """Links between the sections of one file."""

    def index(self, **query: str) -> str:
        return "#index"

    def session(self, session: str, view: str = "", **query: Any) -> str:
        page = query.get("page")
        return _anchor("s", session, view or "timeline", *([f"p{page}"] if page else []))

    def call(self, session: str, receipt: str) -> str:
        return _anchor("s", session, "call", receipt)

    def layer(self, session: str, layer: str) -> str:
        return _anchor("s", session, "layer", layer)

    def node(self, session: str, node: str) -> str:
        return _anchor("s", session, "node", node)

    def function(self, session: str, node: str) -> str:
        return _anchor("s", session, "function", node)

    def file(self, path: str) -> str | None:
        return None  # the file's text is in the node, which the export shows


def _section(anchor: str, body: str) -> str:
    return f'<section class="view" id="{escape(anchor[1:])}">{body}</section>'


def export_html(viewer: Viewer, out: Path, sessions: Sequence[str] | None = None) -> int:
    """Write the views of ``sessions`` (default: all) to ``out``; returns the sections."""
    links = ExportLinks()
    rows = viewer.sessions()
    if sessions is not None:
        rows = [r for r in rows if r.id in set(sessions)]
    body = pages.sessions_page(rows, links, query="", url=viewer.store.url)
    body = body.replace('<form method="get" action="/">', "<form hidden>", 1)
    parts = [_section("#index", body)]
    for row in rows:
        parts += _session_sections(viewer, row.id, links)
    document = pages.document(f"export of {viewer.store.url}", "".join(parts))
    document = document.replace("</style>", EXTRA_STYLE + "</style>", 1)
    document = document.replace('<a href="/">sessions</a>', '<a href="#index">sessions</a>')
    out.write_text(document, encoding="utf-8")
    return len(parts)


def _session_sections(viewer: Viewer, session: str, links: ExportLinks) -> list[str]:
    found: list[str] = []
    receipts = viewer.receipts(session)
    total = len(receipts)
    summary = f"{figure(total)} LLM calls (an export: the newest {CALLS} prompts are written out)"
    for page in range(max(1, -(-total // pages.PAGE))):
        calls, _ = viewer.calls(session, page, pages.PAGE, kinds=page * pages.PAGE >= total - CALLS)
        body = pages.timeline_page(session, calls, total, page, links, summary=summary)
        found.append(_section(links.session(session, "", page=page or ""), body))
    for number, receipt in enumerate(receipts):
        if number < total - CALLS:
            continue
        prompt = viewer.prompt(session, receipt.id)
        body = pages.prompt_page(session, prompt, number, links)
        found.append(_section(links.call(session, receipt.id), body))
    if receipts:
        last = receipts[-1].id
        body = f'<p><a href="{links.call(session, last)}">the last call</a></p>'
        found.append(_section(links.session(session, "prompt"), body))
    layers = viewer.layers(session)
    body = layer_pages.layers_page(session, layers, links)
    found.append(_section(links.session(session, "layers"), body))
    for layer in layers:
        body = layer_pages.layer_page(
            session,
            viewer.layer(session, layer.id, 0, pages.PAGE),
            links,
            writable=False,
            confirm=None,
            csrf="",
            paged=False,
        )
        found.append(_section(links.layer(session, layer.id), body))
    functions = viewer.functions(session)
    body = pages.functions_page(session, functions, links)
    found.append(_section(links.session(session, "functions"), body))
    for _, node, _ in functions:
        body = pages.function_page(session, node, viewer.expand(session, node.id), links)
        found.append(_section(links.function(session, node.id), body))
    records = viewer.records(session)
    body = pages.records_page(session, records, links, tier="")
    found.append(_section(links.session(session, "records"), body))
    body = pages.tabs(session, links) + "<p class='dim'>search needs the running viewer</p>"
    found.append(_section(links.session(session, "search"), body))
    graph, _ = viewer.loaded(session)
    nodes = graph.nodes()
    for page in range(max(1, -(-len(nodes) // pages.PAGE))):
        chunk = nodes[page * pages.PAGE : (page + 1) * pages.PAGE]
        body = pages.nodes_page(session, chunk, len(nodes), page, links)
        found.append(_section(links.session(session, "nodes", page=page or ""), body))
        if len(nodes) > NODES:
            break
    if len(nodes) <= NODES:
        every = graph.layers()
        for node in nodes:
            body = pages.node_page(session, node, every, links)
            found.append(_section(links.node(session, node.id), body))
    return found
