"""The viewer's layer pages: the list, one layer before and after (with its rollback,
asked for and confirmed), and what a rollback did."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graph import ChatMessage, LayerInfo
from openprogram._reports._views import SAVED
from openprogram._view._pages import Links, e, tabs
from openprogram._view._provenance import message_text
from openprogram._view._svg import figure


def layers_page(session: str, layers: Sequence[LayerInfo], links: Links) -> str:
    rows = "".join(
        f'<tr><td><a href="{e(links.layer(session, x.id))}">{e(x.id)}</a></td>'
        f"<td>{e(x.kind)}</td><td>{'active' if x.active else 'rolled back'}</td>"
        f'<td class="n">{figure(len(x.covers))}</td>'
        f"<td>{e(', '.join(x.layer.builds_on) or '—')}</td>"
        f"<td>{e(x.at.strftime('%Y-%m-%d %H:%M:%S'))}</td></tr>"
        for x in layers
    )
    return (
        f"{tabs(session, links)}<h3>Layers</h3><table id='layers'><thead><tr><th>layer</th>"
        "<th>kind</th><th>state</th><th>covers</th><th>builds on</th><th>made (UTC)</th></tr>"
        f"</thead><tbody>{rows}</tbody></table>"
        + ("" if layers else "<p class='dim'>no layers</p>")
    )


def _messages(items: Sequence[tuple[ChatMessage, int]]) -> str:
    rows = "".join(
        f"<tr><td>{e(m.get('role'))}</td><td class='n'>{figure(t)}</td>"
        f"<td><pre>{e(message_text(m))}</pre></td></tr>"
        for m, t in items
    )
    return (
        "<table><thead><tr><th>role</th><th>tokens</th><th>message</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def layer_page(
    session: str,
    data: dict[str, Any],
    links: Links,
    *,
    writable: bool,
    confirm: list[LayerInfo] | None,
    csrf: str,
    exported: int | None = None,
) -> str:
    """One layer, its originals a page at a time with links to the others (``exported``:
    the pages a static export wrote, the last of which says how many more there are)."""
    info: LayerInfo = data["info"]
    pager = _originals_pager(session, data, links, exported=exported)
    after = sum(t for _, t in data["replacement"])
    built = ", ".join(
        f'<a href="{e(links.layer(session, x.id))}">{e(x.id)}</a>' for x in data["built_on_it"]
    )
    under = ", ".join(
        f'<a href="{e(links.layer(session, x))}">{e(x)}</a>' for x in data["builds_on"]
    )
    anchors = "".join(
        f"<li><b>{e(name)}</b>: {e(_anchor_text(values))}</li>"
        for name, values in (data["anchors"] or {}).items()
    )
    state = "active" if info.active else f"rolled back (seq {info.rolled_back})"
    action = ""
    if writable and info.active:
        if confirm is None:
            action = (
                f'<p><a id="rollback" href="{e(links.layer(session, info.id))}?confirm=1">'
                "<button>Roll back…</button></a></p>"
            )
        else:
            taken = "".join(f"<li>{e(x.kind)} {e(x.id)}</li>" for x in confirm)
            action = (
                '<div class="warn" id="confirm"><p>Rolling back this layer also rolls back '
                f"{figure(len(confirm))} layer(s) built on it:</p>"
                f"<ul>{taken or '<li>none</li>'}</ul>"
                f'<form method="post" action="{e(links.layer(session, info.id))}/rollback">'
                f'<input type="hidden" name="csrf" value="{e(csrf)}">'
                '<button id="confirm-rollback">Confirm rollback</button></form></div>'
            )
    return (
        f"{tabs(session, links)}<h3>Layer {e(info.id)} ({e(info.kind)}, {e(state)})</h3>"
        f"<p>covers {figure(len(info.covers))} nodes: {_totals(data, after, exported)} "
        "Builds on: "
        f"{under or '—'}. Built on it: {built or '—'}.</p>{action}"
        + (f"<div class='box'><b>Anchors</b><ul>{anchors}</ul></div>" if anchors else "")
        + "<div class='cols'><div id='before'><h4>Before: the originals</h4>"
        f"{pager}{_messages(data['originals'])}</div>"
        "<div id='after'><h4>After: the replacement</h4>"
        f"{_messages(data['replacement'])}</div></div>"
    )


def _totals(data: dict[str, Any], after: int, exported: int | None) -> str:
    """Tokens saved, and the originals' and replacement's tokens; while the originals are
    being counted (a layer made before its maker kept them), a line that says so."""
    if data["before"] is None and exported is not None:
        return (
            "<b id='saved'>not counted</b> in this export <span class='dim'>(a layer made "
            "before its totals were kept: `openprogram view` counts them)</span>; "
            f"{figure(after)} in the replacement."
        )
    if data["before"] is None:
        return (
            "<b id='saved'>counting</b> the originals' tokens <span class='dim'>(a layer "
            "made before its totals were kept: counted once, in the background; reload in "
            f"a moment)</span>; {figure(after)} in the replacement."
        )
    return (
        f"<b id='saved'>{figure(data['saved'])}</b> tokens saved "
        f"<span class='dim'>({e(SAVED)}; what a prompt sheds is less when other tiers had "
        "already cut the covered messages)</span> "
        f"({figure(data['before'])} in the {figure(data['messages'])} original messages, "
        f"{figure(after)} in the replacement)."
    )


def _anchor_text(values: Any) -> str:
    return "; ".join(map(str, values)) if isinstance(values, list) else str(values)


def rolled_back_page(
    session: str, layer: str, done: Sequence[str], before: int, after: int, links: Links
) -> str:
    ids = ", ".join(f'<a href="{e(links.layer(session, x))}">{e(x)}</a>' for x in done)
    return (
        f"{tabs(session, links)}<div class='ok' id='rolled-back'>Rolled back {ids}: the next "
        f"prompt goes from {figure(before)} to <b id='after-tokens'>{figure(after)}</b> "
        "tokens.</div>"
    )


def _originals_pager(
    session: str, data: dict[str, Any], links: Links, *, exported: int | None
) -> str:
    page, pages, count = data["page"], data["pages"], data["count"]
    if pages == 1:
        return ""
    first, shown = data["first"], len(data["originals"])
    last = min(first + data["size"], count)
    said = (
        f"originals {figure(first + 1)}–{figure(last)} of {figure(count)} "
        f"<span class='dim'>(each a message or call, with its tool results: {figure(shown)} "
        "messages here)</span>"
    )
    reach = pages if exported is None else exported
    layer = data["info"].id
    parts = []
    if page > 0:
        parts.append(f'<a href="{e(links.layer_page(session, layer, page - 1))}">← previous</a>')
    parts.append(f"page {figure(page + 1)} of {figure(pages)}: {said}")
    if page + 1 < reach:
        parts.append(f'<a href="{e(links.layer_page(session, layer, page + 1))}">next →</a>')
    elif reach < pages:
        parts.append(
            f"this export holds the first {figure(reach)} pages; `openprogram view` pages the "
            f"other {figure(pages - reach)}"
        )
    return f"<p class='pager'>{' · '.join(parts)}</p>"
