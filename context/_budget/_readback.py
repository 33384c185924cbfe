"""The history tools a placeholder points to, and how it names the part to read back.

The runtime (``openprogram``) serves these tools; the tiers only name them, so the names
live here, below both. A history tool's own result is never offloaded, reduced or cleared:
it is already a page of something stored, and a placeholder for it would send the model
reading the page of a page (a model looped 25 turns on one).
"""

from __future__ import annotations

from graph import GraphReader, node_handle

HISTORY_TOOLS = (
    "inspect_node",
    "read_history",
    "expand_function",
    "expand_layer",
    "read_output",
    "search_history",
)
"""The tools that read history back, by the names they are offered to the model under."""


def is_history_tool(name: str | None) -> bool:
    """Whether ``name`` is one of :data:`HISTORY_TOOLS`."""
    return name in HISTORY_TOOLS


def read_from(node_id: str, offset: int) -> str:
    """The call that reads a node's output from ``offset`` on, a page at a time (what
    ``read_output`` does: at most 8,000 characters a call, each naming the next offset).

    >>> read_from("N1", 2400)
    'page by page: read_output("N1", offset=2400)'
    """
    return f'page by page: read_output("{node_id}", offset={offset})'


def node_ref(graph: GraphReader, node_id: str) -> str:
    """How a prompt names a stored node: its short handle (``n<seq>``, the same in every
    database holding the session, see ``graph._handles``); an id ``graph`` does not hold
    stays as it is."""
    return node_handle(graph.get(node_id)) if node_id in graph else node_id
