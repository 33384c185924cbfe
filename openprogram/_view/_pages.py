"""The viewer's pages as HTML, rendered on the server. Every stored text goes through
:func:`html.escape` (a message is data, never markup); links come from a :class:`Links`,
so the same pages serve the app (paths) and the static export (anchors in one file)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from context import CompactionRecord, ProviderUsage, as_record_tier, offload_path
from graph import ChatMessage, LayerInfo, Node, text_of
from openprogram._view._facts import FREED, KINDS, Call, Prompt, SessionRow, node_text
from openprogram._view._provenance import message_text
from openprogram._view._svg import COLORS, figure, kind_bar, legend, over_mark, timeline_svg

PAGE = 50
_OFFLOADED = re.compile(r"tool_results/[A-Za-z0-9_-]+/[A-Za-z0-9_-]+\.txt")
"""Calls, nodes and search hits per page."""

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
header{background:#1f2937;color:#fff;padding:8px 16px;display:flex;gap:16px;align-items:center}
header a{color:#cfe0ff;text-decoration:none}header b{font-size:15px}
main{padding:12px 16px;max-width:1180px}
table{border-collapse:collapse;width:100%;background:#fff;margin:8px 0}
th,td{border:1px solid #e3e3e3;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f1f3f5}td.n{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;word-break:break-word;margin:0;font:12px/1.4 ui-monospace,monospace;
max-height:320px;overflow:auto}
nav.tabs a{margin-right:12px}.dim{color:#777}.key{margin-right:12px;white-space:nowrap}
.key i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle;
box-shadow:inset 0 0 0 1px rgba(0,0,0,.35)}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:12px}
.box{background:#fff;border:1px solid #e3e3e3;padding:8px;margin:8px 0}
.warn{background:#fff4e5;border:1px solid #f4a236;padding:8px;margin:8px 0}
.ok{background:#e8f5e9;border:1px solid #34a853;padding:8px;margin:8px 0}
.tag{display:inline-block;padding:0 6px;border-radius:8px;background:#eef;font-size:12px}
.running{background:#fff3bf}.completed{background:#d3f9d8}.error{background:#ffe3e3}
.interrupted{background:#f3d9fa}button{font:inherit;padding:4px 10px;cursor:pointer}
input[type=search]{font:inherit;padding:3px 6px;width:320px}
"""


class Links:
    """Where each view is: paths of the app."""

    def index(self, **query: str) -> str:
        return "/" + (f"?{urlencode(query)}" if query else "")

    def session(self, session: str, view: str = "", **query: Any) -> str:
        path = f"/s/{quote(session, safe='')}" + (f"/{view}" if view else "")
        return path + (f"?{urlencode(query)}" if query else "")

    def call(self, session: str, receipt: str) -> str:
        return self.session(session, f"call/{quote(receipt, safe='')}")

    def layer(self, session: str, layer: str) -> str:
        return self.session(session, f"layer/{quote(layer, safe='')}")

    def layer_page(self, session: str, layer: str, page: int) -> str:
        """A page of a layer's originals."""
        return self.layer(session, layer) + (f"?page={page}" if page else "")

    def node(self, session: str, node: str) -> str:
        return self.session(session, f"node/{quote(node, safe='')}")

    def function(self, session: str, node: str) -> str:
        return self.session(session, f"function/{quote(node, safe='')}")

    def file(self, path: str) -> str | None:
        """An offloaded output, by its path in the state folder (None: not served)."""
        return f"/files/{quote(path)}"


def e(value: object) -> str:
    return escape(str(value), quote=True)


def document(title: str, body: str, *, script: str = "", nonce: str = "", version: str = "") -> str:
    """A whole page: the header, the body in ``<main id="main">``, and the live script."""
    tag = f'<script nonce="{e(nonce)}">{script}</script>' if script else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{e(title)} · openprogram view</title><style>{STYLE}</style></head>"
        '<body><header><b>openprogram view</b><a href="/">sessions</a>'
        f'<span class="dim">{e(title)}</span></header>'
        f'<main id="main" data-version="{e(version)}">{body}</main>{tag}'
        "</body></html>"
    )


def sessions_page(rows: Sequence[SessionRow], links: Links, *, query: str, url: str) -> str:
    found = "".join(
        f'<tr data-id="{e(r.id)}"><td><a href="{e(links.session(r.id))}">{e(r.id)}</a></td>'
        f'<td class="n">{figure(r.nodes)}</td><td class="n">{figure(r.calls)}</td>'
        f'<td class="n">{figure(r.branches)}</td>'
        f'<td class="n">{figure(r.layers_active)} active of {figure(r.layers_made)}</td>'
        f"<td>{e(r.last_activity)}</td><td>{e(r.created)}</td></tr>"
        for r in rows
    )
    return (
        f"<h2>Sessions</h2><p class='dim'>{e(url)}</p>"
        '<form method="get" action="/"><input type="search" name="q" '
        f'placeholder="search by name or id" value="{e(query)}"> <button>search</button></form>'
        '<table id="sessions"><thead><tr><th>session</th><th>nodes</th><th>LLM calls</th>'
        "<th>branches</th><th>layers</th><th>last activity (UTC)</th><th>created (UTC)</th>"
        f"</tr></thead><tbody>{found}</tbody></table>"
        + ("" if rows else "<p class='dim'>no sessions</p>")
    )


def tabs(session: str, links: Links) -> str:
    views = [
        ("", "timeline"),
        ("prompt", "last prompt"),
        ("layers", "layers"),
        ("functions", "functions"),
        ("records", "records"),
        ("search", "search"),
        ("nodes", "nodes"),
    ]
    items = "".join(f'<a href="{e(links.session(session, v))}">{e(n)}</a>' for v, n in views)
    return f"<h2>Session {e(session)}</h2><nav class='tabs'>{items}</nav>"


def pager(links: Links, session: str, view: str, page: int, total: int, **query: Any) -> str:
    pages = max(1, -(-total // PAGE))
    if pages == 1:
        return ""
    parts = []
    if page > 0:
        back = links.session(session, view, page=page - 1, **query)
        parts.append(f'<a href="{e(back)}">← previous</a>')
    parts.append(f"page {figure(page + 1)} of {figure(pages)}")
    if page + 1 < pages:
        ahead = links.session(session, view, page=page + 1, **query)
        parts.append(f'<a href="{e(ahead)}">next →</a>')
    return f"<p class='pager'>{' · '.join(parts)}</p>"


def timeline_page(
    session: str, calls: Sequence[Call], total: int, page: int, links: Links, *, summary: str
) -> str:
    detailed = all(c.by_kind is not None for c in calls)
    kinds = list(KINDS) if detailed else ["tool schemas", "messages"]
    note = (
        ""
        if detailed
        else f"<p class='dim' id='kinds-note'>bars show tokens of the receipts; "
        f'<a href="{e(links.session(session, page=page, kinds=1))}">stack them by kind</a> '
        "(renders each call of this page again)</p>"
    )
    chart = timeline_svg(calls, lambda c: links.call(session, c.receipt.id))
    return (
        f"{tabs(session, links)}<p>{summary}</p><h3>Timeline: {figure(total)} LLM calls</h3>"
        f"{legend(kinds)}{chart}{note}{pager(links, session, '', page, total)}"
        + calls_table(session, calls, links)
    )


def replay_hint(session: str, url: str, links: Links) -> str:
    """What a session that sent no prompt (an imported trace) says: how to replay it."""
    return (
        "<div class='box' id='replay-hint'>No LLM call recorded yet: this session's messages "
        "were stored without a prompt being sent through the engine (an imported trace, "
        "say). To see the prompts it would have sent, call by call, replay its trace: "
        f"<pre>openprogram replay TRACE --db {e(url)}</pre>"
        f'The next prompt is under <a href="{e(links.session(session, "prompt"))}">last '
        "prompt</a>.</div>"
    )


INPUT_HEADS = (
    "<th title='input tokens the provider read from its prompt cache'>cached input</th>"
    "<th title='input tokens the provider did not read from its cache (cache writes "
    "included)'>uncached input</th>"
)


def input_cells(usage: ProviderUsage | None) -> str:
    """A call's input as the provider reported it (a proxy saw its answer), else dashes."""
    if usage is None:
        return '<td class="n dim">–</td><td class="n dim">–</td>'
    return (
        f'<td class="n cached">{figure(usage.cached_input_tokens)}</td>'
        f'<td class="n uncached">{figure(usage.uncached_input_tokens)}</td>'
    )


def calls_table(session: str, calls: Sequence[Call], links: Links) -> str:
    rows = []
    for call in calls:
        r = call.receipt
        freed = call.freed
        tiers = ", ".join(dict.fromkeys(x.tier for x in call.compactions))
        frame = (
            "top level"
            if r.frame is None
            else f'<a href="{e(links.function(session, r.frame))}">{e(r.frame)}</a>'
        )
        rows.append(
            f'<tr><td><a href="{e(links.call(session, r.id))}">call {call.number + 1:,}</a></td>'
            f"<td>{e(r.at[:19].replace('T', ' '))}</td><td>{frame}</td>"
            f'<td class="n">{figure(r.tokens)}{over_mark(r.tokens, r.budget)}</td>'
            f'<td class="n">{figure(r.budget)}</td>'
            f'<td class="n">{figure(r.messages)}</td>{input_cells(r.usage)}'
            f"<td>{e(tiers)}{f' (freed {figure(freed)})' if freed else ''}</td></tr>"
        )
    return (
        "<table><thead><tr><th>call</th><th>at (UTC)</th><th>frame</th><th>tokens</th>"
        f"<th>budget</th><th>messages</th>{INPUT_HEADS}"
        f"<th title='freed: {e(FREED)}'>compactions (freed)</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def prompt_page(session: str, prompt: Prompt, number: int, links: Links) -> str:
    receipt = prompt.receipt
    if receipt is None:
        heading = "The next prompt (no prompt sent yet)"
        said = "rendered from the session's head under its stored configuration"
    else:
        where = "the top level" if receipt.frame is None else f"function {receipt.frame}"
        heading = f"Call {number + 1:,}: the prompt as sent"
        how = "exactly as sent" if prompt.exact else "rendered again from its receipt"
        said = (
            f"receipt {e(receipt.id)}, {how}, from {e(where)} at "
            f"{e(receipt.at[:19].replace('T', ' '))}"
        )
    kinds = "".join(
        f'<tr><td><span class="key"><i style="background:{COLORS[k]}"></i>{e(k)}</span></td>'
        f'<td class="n" data-kind="{e(k)}">{figure(prompt.by_kind.get(k, 0))}</td>'
        f'<td class="n">{prompt.by_kind.get(k, 0) / max(1, prompt.budget):.1%}</td></tr>'
        for k in KINDS
    )
    rows = []
    for row in prompt.rows:
        source = e(row.source)
        if row.layer:
            source = f'<a href="{e(links.layer(session, row.layer))}">{source}</a>'
        elif row.node:
            source = f'<a href="{e(links.node(session, row.node))}">{source}</a>'
        files = _OFFLOADED.findall(row.text)  # prompts from before placeholders named no file
        if row.variant == "offloaded" and row.node:
            files.insert(0, offload_path(Path(), session, row.node).as_posix())
        for path in dict.fromkeys(files):
            href = links.file(path)
            if href is not None:
                source += f'<br><a class="file" href="{e(href)}">offloaded file</a>'
        rows.append(
            f'<tr class="msg" data-kind="{e(row.kind)}"><td class="n">{row.index + 1}</td>'
            f"<td>{e(row.role)}</td><td>{e(row.kind)}</td>"
            f'<td class="n tokens">{figure(row.tokens)}</td><td>{source}</td>'
            f"<td><pre>{e(row.text)}</pre></td></tr>"
        )
    return (
        f"{tabs(session, links)}<h3>{heading}</h3>"
        f"<p>{said}: <b id='total'>{figure(prompt.tokens)}</b> of "
        f"{figure(prompt.budget)} tokens{over_mark(prompt.tokens, prompt.budget)}, "
        f"{figure(len(prompt.rows))} messages; tiers: "
        f"{e(', '.join(prompt.tiers) or 'none')}</p>{kind_bar(prompt.by_kind, prompt.budget)}"
        '<table id="kinds" style="width:auto"><thead><tr><th>kind</th><th>tokens</th>'
        f"<th>of budget</th></tr></thead><tbody>{kinds}</tbody></table>"
        '<table id="messages"><thead><tr><th>#</th><th>role</th><th>kind</th><th>tokens</th>'
        f"<th>from</th><th>message</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def functions_page(
    session: str, functions: Sequence[tuple[int, Node, dict[str, int]]], links: Links
) -> str:
    rows = []
    for depth, node, fired in functions:
        payload: Any = node.payload
        tiers = ", ".join(
            f"{t} ×{n}" if n > 1 else t for t, n in fired.items() if as_record_tier(t) != "rollback"
        )
        rows.append(
            f'<tr><td style="padding-left:{8 + 18 * depth}px">'
            f'<a href="{e(links.function(session, node.id))}">{e(payload.name)}</a> '
            f'<span class="dim">{e(node.id)}</span></td>'
            f'<td><span class="tag {e(node.status)}">{e(node.status)}</span></td>'
            f"<td>{e(payload.expose)}</td><td>{e(tiers or '—')}</td>"
            f"<td><pre>{e(_short(payload.input))}</pre></td></tr>"
        )
    return (
        f"{tabs(session, links)}<h3>Function tree</h3><table id='functions'><thead><tr>"
        "<th>function</th><th>status</th><th>expose</th><th>tiers in its prompts</th>"
        f"<th>input</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        + ("" if functions else "<p class='dim'>no functions</p>")
    )


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + "…"


def function_page(session: str, node: Node, steps: list[ChatMessage], links: Links) -> str:
    payload: Any = node.payload
    rows = "".join(
        f"<tr><td>{e(m.get('role'))}</td><td><pre>{e(message_text(m))}</pre></td></tr>"
        for m in steps
    )
    output = "" if node.finish is None else _short(node.finish.output or node.finish.error, 2000)
    return (
        f"{tabs(session, links)}<h3>Function {e(payload.name)} "
        f'<span class="tag {e(node.status)}">{e(node.status)}</span></h3>'
        f"<p class='dim'>{e(node.id)}</p><div class='box'><b>input</b><pre>"
        f"{e(_short(payload.input, 2000))}</pre><b>output</b><pre>{e(output)}</pre></div>"
        f"<h4>Inner steps</h4><table id='steps'><tbody>{rows}</tbody></table>"
    )


def records_page(
    session: str, records: Sequence[CompactionRecord], links: Links, *, tier: str
) -> str:
    tiers = sorted({r.tier for r in records})
    options = "".join(
        f'<option value="{e(t)}"{" selected" if t == tier else ""}>{e(t)}</option>' for t in tiers
    )
    rows = "".join(
        f'<tr data-tier="{e(r.tier)}"><td>{e(r.timestamp[:19].replace("T", " "))}</td>'
        f"<td>{e(r.tier)}</td><td class='n'>{figure(r.tokens_before)}</td>"
        f"<td class='n'>{figure(r.tokens_after)}</td><td class='n'>{r.ratio:.2f}</td>"
        f"<td>{_what(session, r, links)}</td><td>{e(r.error or '')}</td></tr>"
        for r in records
        if not tier or r.tier == tier
    )
    return (
        f"{tabs(session, links)}<h3>Compaction records</h3>"
        f'<form method="get" action="{e(links.session(session, "records"))}">tier '
        f'<select name="tier" id="tier"><option value="">all</option>{options}</select> '
        "<button>filter</button></form><table id='records'><thead><tr><th>time</th>"
        "<th>tier</th><th>before</th><th>after</th><th>ratio</th><th>what</th><th>error</th>"
        f"</tr></thead><tbody>{rows}</tbody></table>"
    )


def _what(session: str, record: CompactionRecord, links: Links) -> str:
    layer = record.details.get("layer")
    if layer:
        return f'layer <a href="{e(links.layer(session, str(layer)))}">{e(layer)}</a>'
    if record.offloaded:
        return f"{figure(len(record.offloaded))} file(s) offloaded"
    if record.details.get("layers"):
        return "rolled back " + e(", ".join(map(str, record.details["layers"])))
    if record.details.get("trigger"):
        return f"trigger {e(record.details['trigger'])}"
    return ""


NOT_SHOWN = "not in the last prompt"
"""A search hit the last prompt does not name (dropped, or stored after it)."""


def search_page(
    session: str,
    query: str,
    hits: Sequence[tuple[Node, str]],
    total: int,
    links: Links,
    *,
    shown: dict[str, str],
) -> str:
    """The hits of ``query``, each with how the last prompt showed it (``shown``: from
    its sources, see :meth:`Viewer.shown`)."""
    rows = "".join(
        f'<tr><td><a href="{e(links.node(session, n.id))}">{e(n.id)}</a></td>'
        f"<td>{e(n.kind)} {e(n.role or getattr(n.payload, 'name', ''))}</td>"
        f'<td class="shown">{_shown_cell(session, shown.get(n.id, NOT_SHOWN), links)}</td>'
        f"<td><pre>{e(snippet)}</pre></td></tr>"
        for n, snippet in hits
    )
    found = (
        f"<p>{figure(total)} node(s) contain {e(query)!r}"
        + (f"; the first {figure(len(hits))} shown" if total > len(hits) else "")
        + "</p>"
        if query
        else ""
    )
    return (
        f"{tabs(session, links)}<h3>Search the whole history</h3><p class='dim'>every node, "
        "those under layers and offloaded outputs included</p>"
        f'<form method="get" action="{e(links.session(session, "search"))}">'
        f'<input type="search" name="q" value="{e(query)}"> <button>search</button></form>'
        f"{found}<table id='hits'><thead><tr><th>node</th><th>kind</th>"
        f"<th>in the last prompt</th><th>text</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _shown_cell(session: str, said: str, links: Links) -> str:
    layer = said.removeprefix("under layer ")
    if layer != said:
        return f'under layer <a href="{e(links.layer(session, layer))}">{e(layer)}</a>'
    return e(said)


def nodes_page(session: str, nodes: Sequence[Node], total: int, page: int, links: Links) -> str:
    rows = "".join(
        f'<tr><td><a href="{e(links.node(session, n.id))}">{e(n.id)}</a></td>'
        f"<td class='n'>{n.seq:,}</td><td>{e(n.kind)}</td>"
        f"<td>{e(n.role or getattr(n.payload, 'name', ''))}</td><td>{e(n.status)}</td>"
        f"<td><pre>{e(_short(node_text(n), 200))}</pre></td></tr>"
        for n in nodes
    )
    return (
        f"{tabs(session, links)}<h3>Nodes ({figure(total)})</h3>"
        f"{pager(links, session, 'nodes', page, total)}<table id='nodes'><thead><tr>"
        "<th>node</th><th>seq</th><th>kind</th><th>role / name</th><th>status</th>"
        f"<th>text</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def node_page(session: str, node: Node, layers: Sequence[LayerInfo], links: Links) -> str:
    under = ", ".join(
        f'<a href="{e(links.layer(session, x.id))}">{e(x.id)}</a> ({e(x.kind)}, '
        f"{'active' if x.active else 'rolled back'})"
        for x in layers
        if node.id in x.covers
    )
    payload: Any = node.payload
    text = text_of(payload.content) if node.kind == "dialogue" else node_text(node)
    return (
        f"{tabs(session, links)}<h3>Node {e(node.id)}</h3><p>{e(node.kind)} "
        f"{e(node.role or payload.name)}, seq {node.seq:,}, {e(node.status)}; under layers: "
        f"{under or '—'}</p><div class='box'><pre id='node-text'>{e(text)}</pre></div>"
    )
