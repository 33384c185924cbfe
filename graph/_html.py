"""HTML for notebooks: how a node or a layer shows in Jupyter (``_repr_html_``)."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._nodes import Node

_SHOWN = 600


def html_table(title: str, rows: list[tuple[str, Any]]) -> str:
    """A small two-column table with a title (values escaped, long ones shortened)."""
    body = "".join(
        f"<tr><th style='text-align:left;padding-right:1em'>{escape(k)}</th>"
        f"<td style='text-align:left'><pre style='margin:0;white-space:pre-wrap'>"
        f"{escape(_short(v))}</pre></td></tr>"
        for k, v in rows
        if v not in (None, "", [], {})
    )
    return f"<div><b>{escape(title)}</b><table>{body}</table></div>"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]} … ({len(text):,} characters)"


def node_html(node: Node) -> str:
    payload: Any = node.payload
    rows: list[tuple[str, Any]] = [("kind", node.kind), ("seq", node.seq), ("at", str(node.at))]
    if node.kind == "dialogue":
        rows += [
            ("role", payload.role),
            ("content", payload.content),
            ("thinking", payload.thinking),
        ]
    elif node.kind == "tool":
        rows += [("tool", payload.name), ("arguments", payload.arguments), ("status", node.status)]
        if node.result is not None:
            rows.append(("result", node.result.content))
    else:
        rows += [("function", payload.name), ("input", payload.input), ("status", node.status)]
        if node.finish is not None:
            rows += [("output", node.finish.output), ("error", node.finish.error)]
    rows.append(("meta", node.meta))
    return html_table(f"node {node.id}", rows)


def layer_html(info: Any) -> str:
    state = "active" if info.active else f"rolled back at seq {info.rolled_back}"
    replacement = info.layer.replacement
    shown = (
        "\n\n".join(str(m.get("content", "")) for m in replacement if isinstance(m, dict))
        if isinstance(replacement, list)
        else replacement
    )
    return html_table(
        f"{info.kind} layer {info.id}",
        [
            ("state", state),
            ("made at seq", info.seq),
            ("covers", f"{len(info.covers)} nodes: {info.covers[0]} … {info.covers[-1]}"),
            ("builds on", ", ".join(info.builds_on)),
            ("shown instead", shown),
        ],
    )
