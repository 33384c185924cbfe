"""Plots (matplotlib, the ``bench`` extra): a session's function tree, and a replay's
prompt tokens per turn with the tiers that fired."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from graph import GraphReader
from openprogram._errors import OpenProgramError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

TIER_COLORS = {
    "offload": "tab:purple",
    "budget_reduction": "tab:pink",
    "microcompact": "tab:orange",
    "collapse": "tab:green",
    "compact": "tab:blue",
    "snip": "tab:red",
    "emergency": "black",
}
STATUS_COLORS = {
    "completed": "#4caf50",
    "running": "#ffc107",
    "error": "#e53935",
    "interrupted": "#ab47bc",
}


def _pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise OpenProgramError(
            "plotting needs matplotlib: pip install 'openprogram[bench]'"
        ) from error
    return plt


def check_plot_target(out: Path) -> None:
    """Fail before a long replay, not after it: matplotlib must be installed and the
    plot's folder must exist (it is never created behind the user's back)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as error:
        raise OpenProgramError(
            "--plot needs matplotlib: pip install 'openprogram[bench]'"
        ) from error
    folder = out.parent
    if not folder.is_dir():
        raise OpenProgramError(f"--plot {out}: no folder {folder}")


def _short(name: str, width: int = 14) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def plot_functions(graph: GraphReader | Any, ax: Axes | None = None) -> Figure:
    """Draw a session's agentic function calls as a tree, left to right: one row per
    call, indented by depth, labelled with the function's name (numbered when it repeats)
    and coloured by status. ``graph`` is a graph or a ``Session``. Returns the figure."""
    plt = _pyplot()
    reader: GraphReader = getattr(graph, "graph", graph)
    functions = [n for n in reader.nodes() if n.kind == "function"]
    known = {n.id for n in functions}

    def caller_of(node_id: str) -> str | None:
        caller = reader.state.caller.get(node_id)
        while caller is not None and caller not in known:
            caller = reader.state.caller.get(caller)
        return caller

    children: dict[str | None, list[str]] = collections.defaultdict(list)
    for node in functions:
        children[caller_of(node.id)].append(node.id)
    rows: list[tuple[str, int]] = []

    def walk(caller: str | None, depth: int) -> None:
        for child in children.get(caller, []):
            rows.append((child, depth))
            walk(child, depth + 1)

    walk(None, 0)
    deepest = max((depth for _, depth in rows), default=0)
    if ax is None:
        height = max(2.0, 0.28 * len(rows) + 1.0)
        figure, ax = plt.subplots(figsize=(min(12.0, 4.0 + 1.6 * deepest), height))
    else:
        figure = ax.figure
    seen: collections.Counter[str] = collections.Counter()
    place: dict[str, tuple[float, float]] = {}
    for row, (node_id, depth) in enumerate(rows):
        node = reader.get(node_id)
        name = str(getattr(node.payload, "name", "?"))
        seen[name] += 1
        x, y = float(depth), float(-row)
        place[node_id] = (x, y)
        parent = caller_of(node_id)
        if parent in place:
            px, py = place[parent]
            ax.plot([px, px, x], [py, y, y], color="#bbbbbb", linewidth=1, zorder=1)
        color = STATUS_COLORS.get(node.status, "#9e9e9e")
        ax.scatter([x], [y], s=60, color=color, zorder=2, edgecolors="white")
        label = f"{_short(name)} #{seen[name]}" if depth == 0 else _short(name)
        ax.annotate(label, (x, y), xytext=(8, 0), textcoords="offset points", va="center",
                    fontsize=8)  # fmt: skip
    for status, color in STATUS_COLORS.items():
        if any(reader.get(node_id).status == status for node_id, _ in rows):
            ax.scatter([], [], s=60, color=color, label=status)
    ax.set_xlim(-0.2, deepest + 1.6)
    ax.set_ylim(-len(rows) + 0.5, 0.8)
    ax.axis("off")
    ax.set_title(f"{len(rows)} agentic function calls (left to right: caller → callee)")
    if rows:
        ax.legend(loc="upper right", fontsize="small", frameon=False)
    figure.tight_layout()
    return cast("Figure", figure)


def draw_replay(
    ax: Axes,
    title: str,
    history: Sequence[int],
    prompt: Sequence[int],
    fired: Sequence[Sequence[str]],
    budget: int,
) -> None:
    """Prompt tokens per turn without management and with the cascade, the budget, and a
    dot on the line where each tier made a new decision."""
    turns = list(range(1, len(prompt) + 1))
    ax.plot(turns, history, label="no management", color="lightgray")
    ax.plot(turns, prompt, label="with the cascade", color="tab:blue")
    ax.axhline(budget, linestyle="--", color="tab:gray", label=f"budget {budget:,}")
    seen: set[str] = set()
    for turn, tiers in zip(turns, fired, strict=True):
        for tier in dict.fromkeys(tiers):
            label = tier if tier not in seen else None
            seen.add(tier)
            ax.scatter([turn], [prompt[turn - 1]], color=TIER_COLORS.get(tier, "tab:brown"),
                       s=22, zorder=3, label=label)  # fmt: skip
    ax.set_xlabel("assistant turn")
    ax.set_ylabel("prompt tokens")
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize="small", ncol=2)


def plot_replay(
    out: Path,
    title: str,
    history: list[int],
    prompt: list[int],
    fired: list[list[str]],
    budget: int,
) -> None:
    """Write a PNG of per-turn tokens; needs the optional ``bench`` extra (matplotlib)."""
    _pyplot()
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 4.5))  # no pyplot state, no window, no backend switch
    draw_replay(figure.add_subplot(), title, history, prompt, fired, budget)
    figure.tight_layout()
    figure.savefig(out, dpi=110)
