"""The timeline chart, drawn as SVG on the server: one bar per LLM call, its prompt tokens
stacked by kind against the budget, a marker at each call whose render compacted (with
the tokens it freed). Every bar links to its prompt. A call is stacked from the messages
its receipt kept, exactly as sent; a receipt written before messages were kept is rendered
again under the layers of now, and where that differs from what was sent (a layer rolled
back since), a black tick marks the receipt's own total."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from openprogram._view._facts import FREED, KINDS, Call

COLORS = {
    "system messages": "#3c4043",
    "tool schemas": "#ced4da",
    "user messages": "#4c8bf5",
    "assistant messages": "#34a853",
    "assistant tool calls": "#0d652d",
    "tool outputs": "#f9c74f",
    "summaries (layers)": "#a142f4",
    "placeholders": "#d9480f",
    "messages": "#8d7b68",
}
"""A color per kind; ``messages`` is the part of a call not yet broken down by kind. Any
two differ by at least 25 in CIELAB (ΔE76), so a 10-pixel swatch tells them apart: one
dark and one light grey, no two greys alike."""
OVER = "#b00020"
"""The mark of a prompt over its budget."""


def figure(value: int) -> str:
    """Every number the viewer shows, one way: thousands separated, millions as ``M``."""
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    return f"{value:,}"


WIDTH = 960
HEIGHT = 300
LEFT = 64
BOTTOM = 40
TOP = 24


def over_text(tokens: int, budget: int) -> str:
    """What a prompt over its budget says beside its tokens (nothing when within)."""
    return f", over budget by {figure(tokens - budget)}" if tokens > budget else ""


def over_mark(tokens: int, budget: int) -> str:
    """The visible mark of a prompt over its budget, in a table or a heading."""
    if tokens <= budget:
        return ""
    return (
        f' <span class="over" style="color:{OVER};font-weight:600">▲ over budget by '
        f"{figure(tokens - budget)}</span>"
    )


def legend(kinds: Sequence[str]) -> str:
    spans = "".join(
        f'<span class="key"><i style="background:{COLORS[k]}"></i>{escape(k)}</span>' for k in kinds
    )
    return f'<div class="legend">{spans}</div>'


def _parts(call: Call) -> list[tuple[str, int]]:
    if call.by_kind is not None:
        return [(k, call.by_kind.get(k, 0)) for k in KINDS]
    schemas = call.receipt.tool_tokens
    return [("tool schemas", schemas), ("messages", max(0, call.receipt.tokens - schemas))]


def timeline_svg(calls: Sequence[Call], href: Callable[[Call], str]) -> str:
    """The chart of ``calls`` (one page of them)."""
    if not calls:
        return '<p class="dim">no LLM call recorded yet</p>'
    top = max(max(c.receipt.budget, c.receipt.tokens) for c in calls)
    top = max(1, int(top * 1.08))
    inner_w, inner_h = WIDTH - LEFT - 12, HEIGHT - TOP - BOTTOM
    step = inner_w / len(calls)
    bar = max(2.0, step * 0.72)

    def y(tokens: float) -> float:
        return TOP + inner_h - inner_h * tokens / top

    out = [
        f'<svg class="timeline" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
        f'height="{HEIGHT}" role="img" aria-label="prompt tokens per LLM call" '
        'xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" font-size="11">'
    ]
    for fraction in (0, 0.25, 0.5, 0.75, 1.0):
        tokens = int(top * fraction)
        out.append(
            f'<line x1="{LEFT}" x2="{WIDTH - 12}" y1="{y(tokens):.1f}" y2="{y(tokens):.1f}" '
            'stroke="#e6e6e6"/>'
            f'<text x="{LEFT - 6}" y="{y(tokens) + 4:.1f}" text-anchor="end" fill="#666">'
            f"{figure(tokens)}</text>"
        )
    budget_points = []
    for position, call in enumerate(calls):
        x = LEFT + position * step + (step - bar) / 2
        budget_points.append(f"{x:.1f},{y(call.receipt.budget):.1f}")
        budget_points.append(f"{x + bar:.1f},{y(call.receipt.budget):.1f}")
        if call.compactions:
            freed = call.freed
            tiers = ", ".join(dict.fromkeys(r.tier for r in call.compactions))
            cx = x + bar / 2
            out.append(
                f'<g class="compaction"><title>call {call.number + 1:,}: {escape(tiers)} '
                f"freed {figure(freed)} tokens ({FREED})</title>"
                f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{TOP - 6}" y2="{TOP + inner_h}" '
                'stroke="#d93025" stroke-dasharray="3,3"/>'
                f'<path d="M{cx - 5:.1f},{TOP - 14} L{cx + 5:.1f},{TOP - 14} L{cx:.1f},'
                f'{TOP - 6} Z" fill="#d93025"/>'
                f'<text x="{cx + 6:.1f}" y="{TOP - 8}" fill="#d93025" font-size="9">'
                f"−{figure(freed)}</text></g>"
            )
        base = 0
        parts = []
        for kind, tokens in _parts(call):
            if tokens <= 0:
                continue
            parts.append(
                f'<rect x="{x:.1f}" y="{y(base + tokens):.1f}" width="{bar:.1f}" '
                f'height="{y(base) - y(base + tokens):.1f}" fill="{COLORS[kind]}">'
                f"<title>{escape(kind)}: {figure(tokens)}</title></rect>"
            )
            base += tokens
        receipt = call.receipt
        if call.by_kind is not None and base != receipt.tokens:
            parts.append(  # the layers changed since it was sent (a rollback, say)
                f'<line class="sent" x1="{x - 2:.1f}" x2="{x + bar + 2:.1f}" '
                f'y1="{y(receipt.tokens):.1f}" y2="{y(receipt.tokens):.1f}" stroke="#111" '
                f'stroke-width="2"><title>sent: {figure(receipt.tokens)} tokens; rendered now '
                f"under today's layers: {figure(base)}</title></line>"
            )
        where = "" if receipt.frame is None else f" in function {receipt.frame}"
        title = (
            f"call {call.number + 1:,}{where}: {figure(receipt.tokens)} of "
            f"{figure(receipt.budget)} tokens{over_text(receipt.tokens, receipt.budget)} "
            f"({receipt.at[11:19]})"
        )
        over = receipt.tokens > receipt.budget
        if over:  # a mark above the bar: it is drawn past the budget line
            parts.append(
                f'<text class="over-mark" x="{x + bar / 2:.1f}" y="{y(receipt.tokens) - 3:.1f}" '
                f'text-anchor="middle" fill="{OVER}" font-size="10">▲</text>'
            )
        out.append(
            f'<a href="{escape(href(call))}" class="bar{" over" if over else ""}" '
            f'data-call="{escape(receipt.id)}"><title>{escape(title)}</title>{"".join(parts)}</a>'
        )
        if len(calls) <= 40 or position % max(1, len(calls) // 20) == 0:
            out.append(
                f'<text x="{x + bar / 2:.1f}" y="{TOP + inner_h + 14}" text-anchor="middle" '
                f'fill="#666">{call.number + 1:,}</text>'
            )
    out.append(
        f'<polyline points="{" ".join(budget_points)}" fill="none" stroke="#d93025" '
        'stroke-width="1.5"><title>budget</title></polyline>'
        f'<text x="{LEFT}" y="{HEIGHT - 6}" fill="#444">LLM call →</text>'
        f'<text x="{WIDTH - 12}" y="{HEIGHT - 6}" text-anchor="end" fill="#d93025">'
        "— budget</text>"
        f'<text x="{WIDTH - 90}" y="{HEIGHT - 6}" text-anchor="end" fill="#111">'
        "— as sent, where the layers changed since</text>"
        f'<text x="{WIDTH - 390}" y="{HEIGHT - 6}" text-anchor="end" fill="{OVER}">'
        "▲ over budget</text></svg>"
    )
    return "".join(out)


def kind_bar(by_kind: dict[str, int], budget: int) -> str:
    """One horizontal bar of a prompt's kinds against its budget."""
    total = max(budget, sum(by_kind.values()), 1)
    rects = []
    x = 0.0
    for kind in KINDS:
        tokens = by_kind.get(kind, 0)
        if tokens <= 0:
            continue
        w = 900 * tokens / total
        rects.append(
            f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="22" fill="{COLORS[kind]}">'
            f"<title>{escape(kind)}: {figure(tokens)}</title></rect>"
        )
        x += w
    edge = 900 * budget / total
    return (
        '<svg class="kindbar" viewBox="0 0 904 26" width="904" height="26" '
        f'xmlns="http://www.w3.org/2000/svg">{"".join(rects)}'
        f'<line x1="{edge:.1f}" x2="{edge:.1f}" y1="0" y2="26" stroke="#d93025" '
        'stroke-width="2"><title>budget</title></line></svg>'
    )
