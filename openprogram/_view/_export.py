"""``openprogram view --html OUT``: the viewer's pages as static files to attach to a bug
report, paged as the live viewer pages them. ``OUT`` is the session list; every other page
is a file of its own in the folder beside it (``OUT``'s name with ``_files``), with links
between them, no script and no outside resource. Each page is written as soon as it is
made, so a 100,000-node session costs one page's memory, not one giant document's.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from openprogram._view import _layer_pages as layer_pages
from openprogram._view import _pages as pages
from openprogram._view._data import Viewer
from openprogram._view._svg import figure

CALLS = 200
"""Calls whose prompts are written out, per session (the newest ones)."""
NODES = 2_000
"""Sessions up to this many nodes get a page per node; a longer one's node links open the
page of the node list that holds it."""
LAYER_PAGES = 20
"""Pages of a layer's originals written out (the first ones); the last says how many
more ``openprogram view`` pages."""
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def folder_for(out: Path) -> Path:
    """The folder beside ``OUT`` that holds every page but the session list."""
    return out.with_name(f"{out.stem}_files")


def _slug(*parts: str) -> str:
    """A file name for a page: its parts joined, anything but ``[A-Za-z0-9_.-]`` replaced
    and a short hash of the original added when anything was (ids are user data)."""
    text = "-".join(parts)
    safe = _SAFE.sub("_", text)
    if safe != text:
        safe += "-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return safe[:180] + ".html"


class ExportLinks(pages.Links):
    """Links between the exported files: ``prefix`` is where the pages' folder is from the
    page being written (``NAME_files/`` from the session list, nothing from inside it)."""

    def __init__(self, prefix: str, home: str) -> None:
        self.prefix = prefix
        self.home = home
        self.node_pages: dict[str, dict[str, int]] = {}
        """For a session too long for a page per node: the node list's page of each node."""
        self.layer_pages: dict[tuple[str, str], int] = {}
        """The pages of each layer's originals written out."""
        self._made: dict[str, str] = {}
        self._lists: dict[tuple[str, str, int], str] = {}

    def _to(self, name: str) -> str:
        found = self._made.get(name)
        if found is None:
            found = self._made[name] = self.prefix + quote(name)
        return found

    def index(self, **query: str) -> str:
        return self.home

    def session(self, session: str, view: str = "", **query: Any) -> str:
        view = view or "timeline"
        if view in ("version", "prompt") or view.startswith(("call/", "layer/")):
            view = view.split("/", 1)[0]
        key = (session, view, int(query.get("page") or 0))
        found = self._lists.get(key)
        if found is None:
            found = self._lists[key] = self._to(_slug("s", session, view, f"p{key[2]}"))
        return found

    def call(self, session: str, receipt: str) -> str:
        return self._to(_slug("s", session, "call", receipt))

    def layer(self, session: str, layer: str) -> str:
        return self.layer_page(session, layer, 0)

    def layer_page(self, session: str, layer: str, page: int) -> str:
        return self._to(_slug("s", session, "layer", layer, f"p{page}"))

    def node(self, session: str, node: str) -> str:
        where = self.node_pages.get(session)
        if where is not None:
            return self.session(session, "nodes", page=where.get(node, 0))
        return self._to(_slug("s", session, "node", node))

    def function(self, session: str, node: str) -> str:
        return self._to(_slug("s", session, "function", node))

    def file(self, path: str) -> str | None:
        return None  # the file's text is in the node, which the export shows


class _Writer:
    """Writes each page as one static document: inside the pages' folder or the list."""

    def __init__(self, out: Path, url: str) -> None:
        self.out = out
        self.folder = folder_for(out)
        self.folder.mkdir(exist_ok=True)
        self.url = url
        self.inner = ExportLinks("", f"../{quote(out.name)}")
        self.outer = ExportLinks(f"{quote(self.folder.name)}/", quote(out.name))
        self.outer.node_pages = self.inner.node_pages
        self.outer.layer_pages = self.inner.layer_pages
        self.written = 0

    def page(self, href: str, title: str, body: str, *, outer: bool = False) -> None:
        """Write ``body`` to the file ``href`` names (a link made by ``self.inner``)."""
        home = self.outer.home if outer else self.inner.home
        document = pages.document(title, body)
        document = document.replace('<a href="/">sessions</a>', f'<a href="{home}">sessions</a>')
        target = self.out if outer else self.folder / unquote(href)
        target.write_text(document, encoding="utf-8")
        self.written += 1


def export_html(viewer: Viewer, out: Path, sessions: Sequence[str] | None = None) -> int:
    """Write the pages of ``sessions`` (default: all): ``out`` the session list, the others
    in the folder :func:`folder_for` names. Returns the pages written."""
    writer = _Writer(out, viewer.store.url)
    viewer.count_totals = False
    rows = viewer.sessions()
    if sessions is not None:
        rows = [r for r in rows if r.id in set(sessions)]
    for row in rows:
        _session_pages(viewer, row.id, writer)
        viewer.forget(row.id)  # one session's graph in memory at a time
    body = pages.sessions_page(rows, writer.outer, query="", url=viewer.store.url)
    body = body.replace('<form method="get" action="/">', "<form hidden>", 1)
    writer.page("", f"export of {viewer.store.url}", body, outer=True)
    return writer.written


def _session_pages(viewer: Viewer, session: str, writer: _Writer) -> None:
    links = writer.inner
    graph, _ = viewer.loaded(session)
    nodes = graph.nodes()
    if len(nodes) > NODES:
        links.node_pages[session] = {n.id: i // pages.PAGE for i, n in enumerate(nodes)}
    receipts = viewer.receipts(session)
    total = len(receipts)
    summary = f"{figure(total)} LLM calls (an export: the newest {CALLS} prompts are written out)"
    for page in range(max(1, -(-total // pages.PAGE))):
        calls, _ = viewer.calls(session, page, pages.PAGE, kinds=page * pages.PAGE >= total - CALLS)
        body = pages.timeline_page(session, calls, total, page, links, summary=summary)
        body = body.replace(" id='kinds-note'>", " id='kinds-note' hidden>", 1)
        writer.page(links.session(session, page=page), session, body)
    for number, receipt in enumerate(receipts):
        if number < total - CALLS:
            continue
        body = pages.prompt_page(session, viewer.prompt(session, receipt.id), number, links)
        writer.page(links.call(session, receipt.id), session, body)
    if receipts:
        body = (
            f'{pages.tabs(session, links)}<p><a href="{links.call(session, receipts[-1].id)}">'
            "the last call</a></p>"
        )
        writer.page(links.session(session, "prompt"), session, body)
    else:
        body = pages.tabs(session, links) + "<p class='dim'>no LLM call recorded</p>"
        writer.page(links.session(session, "prompt"), session, body)
    layers = viewer.layers(session)
    writer.page(
        links.session(session, "layers"), session, layer_pages.layers_page(session, layers, links)
    )
    for layer in layers:
        _layer_pages(viewer, session, layer.id, writer)
    functions = viewer.functions(session)
    body = pages.functions_page(session, functions, links)
    writer.page(links.session(session, "functions"), session, body)
    for _, node, _ in functions:
        body = pages.function_page(session, node, viewer.expand(session, node.id), links)
        writer.page(links.function(session, node.id), session, body)
    body = pages.records_page(session, viewer.records(session), links, tier="")
    body = body.replace('<form method="get"', "<form hidden", 1)
    writer.page(links.session(session, "records"), session, body)
    body = pages.tabs(session, links) + "<p class='dim'>search needs the running viewer</p>"
    writer.page(links.session(session, "search"), session, body)
    for page in range(max(1, -(-len(nodes) // pages.PAGE))):
        chunk = nodes[page * pages.PAGE : (page + 1) * pages.PAGE]
        body = pages.nodes_page(session, chunk, len(nodes), page, links)
        writer.page(links.session(session, "nodes", page=page), session, body)
    if len(nodes) <= NODES:
        every = graph.layers()
        for node in nodes:
            body = pages.node_page(session, node, every, links)
            writer.page(links.node(session, node.id), session, body)


def _layer_pages(viewer: Viewer, session: str, layer: str, writer: _Writer) -> None:
    links = writer.inner
    first = viewer.layer(session, layer, 0, pages.PAGE)
    written = min(first["pages"], LAYER_PAGES)
    links.layer_pages[(session, layer)] = written
    for page in range(written):
        data = first if page == 0 else viewer.layer(session, layer, page, pages.PAGE)
        body = layer_pages.layer_page(
            session, data, links, writable=False, confirm=None, csrf="", exported=written
        )
        writer.page(links.layer_page(session, layer, page), session, body)
