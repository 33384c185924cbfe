"""A session at a glance, as a notebook shows it (``Session._repr_html_``): its store,
nodes and functions by status, layers, model, policy and usage, in one table."""

from __future__ import annotations

from graph import html_table
from openprogram._runtime._host import SessionHost
from openprogram._runtime._usage import usage_of
from openprogram._words import counted


def session_html(session: SessionHost) -> str:
    """The HTML table a notebook shows for ``session``."""
    nodes = session.graph.nodes()
    functions = [n for n in nodes if n.kind == "function"]
    states = ", ".join(
        f"{sum(1 for f in functions if f.status == s)} {s}"
        for s in ("running", "completed", "error", "interrupted")
        if any(f.status == s for f in functions)
    )
    kinds = counted(len(functions), "function")
    layers = session.graph.layers()
    total = usage_of(session.graph)["total"]
    return html_table(
        f"session {session.id}",
        [
            ("store", session.store.url),
            ("nodes", f"{len(nodes):,} ({kinds}: {states or 'none'})"),
            ("layers", f"{sum(1 for x in layers if x.active)} active of {len(layers)}"),
            ("model", getattr(session.model, "name", None)),
            ("policy", f"{session.policy.name}, budget {session.engine.budget:,}"),
            (
                "usage",
                f"{counted(total['calls'], 'call')}, {total['input_tokens']:,} in, "
                f"{total['output_tokens']:,} out",
            ),
        ],
    )
