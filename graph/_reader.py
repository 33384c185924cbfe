"""Read access to a session's graph: the live graph and views of it as of an earlier seq."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._chat import ChatMessage
from ._errors import LayerNotFound
from ._handles import resolve_ref
from ._nodes import Event, LayerInfo, Node
from ._openai import steps_to_messages
from ._state import GraphState
from ._walk import Step, visible

if TYPE_CHECKING:
    import networkx as nx


class GraphReader:
    """Read access shared by a live graph and a view of it as of an earlier seq."""

    _state: GraphState

    @property
    def session(self) -> str:
        return self._state.session

    @property
    def last_seq(self) -> int:
        """The seq of the newest node or event this reader knows."""
        return self._state.last_seq

    @property
    def state(self) -> GraphState:
        """The in-memory index (read-only by convention; used by ``context``)."""
        return self._state

    def get(self, node_id: str) -> Node:
        """The node with this id, as of this reader."""
        return self._state.get(node_id)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._state.nodes

    def __len__(self) -> int:
        return len(self._state.order)

    def nodes(self) -> list[Node]:
        """Every node in ``seq`` order."""
        nodes = self._state.nodes
        return [nodes[i] for i in self._state.order]

    def children(self, function_id: str) -> list[Node]:
        """The nodes whose caller is ``function_id``, in ``seq`` order."""
        self._state.get(function_id)
        return [self._state.nodes[i] for i in self._state.children.get(function_id, [])]

    def tools(self, assistant_id: str) -> list[Node]:
        """The tool nodes an assistant node requested, in request order."""
        return [self._state.nodes[i] for i in self._state.tools.get(assistant_id, [])]

    def predecessor(self, node_id: str) -> Node | None:
        """The previous node on the conversation chain."""
        prev = self._state.prev.get(node_id)
        return None if prev is None else self._state.nodes[prev]

    def caller(self, node_id: str) -> Node | None:
        """The function node that called ``node_id`` (None at top level)."""
        caller = self._state.caller.get(node_id)
        return None if caller is None else self._state.nodes[caller]

    def branches(self) -> list[str]:
        """The heads of every branch (chain nodes with no successor in their frame)."""
        return self._state.tips()

    def layers(self, *, active: bool | None = None) -> list[LayerInfo]:
        """Layers in creation order; ``active=True`` only those that apply, ``False`` only
        rolled-back ones."""
        found = list(self._state.layers.values())
        return found if active is None else [i for i in found if i.active == active]

    def layer(self, layer_id: str) -> LayerInfo:
        """One layer by id or by its handle (``L3``), as of this reader."""
        try:
            return self._state.layers[layer_id]
        except KeyError:
            found = resolve_ref(self._state, layer_id)
            if found is not None and found in self._state.layers:
                return self._state.layers[found]
            raise LayerNotFound(layer_id, self.session) from None

    def events(self) -> list[Event]:
        """Every event (tool results, function finishes, forks) in ``seq`` order."""
        return list(self._state.events)

    def default_head(self) -> str | None:
        return None

    def visible(
        self, head: str | None = None, frame: str | None = None, *, expose: str | None = None
    ) -> list[Step]:
        """The membership walk: visible nodes from ``head`` (and inside ``frame``)."""
        if head is None and frame is None:
            head = self.default_head()
        return visible(self._state, head, frame, expose=expose)

    def to_openai(self, head: str | None = None) -> list[ChatMessage]:
        """The full, uncompacted history from the root to ``head`` as OpenAI messages."""
        if head is None:
            head = self.default_head()
        return steps_to_messages(visible(self._state, head, expose="full"))

    def to_networkx(self) -> nx.MultiDiGraph:
        """A networkx view: node attribute ``kind`` (and small ones), edge attribute ``type``."""
        from ._nx import to_networkx

        return to_networkx(self._state)

    def at(self, seq: int) -> GraphView:
        """The graph exactly as it was after ``seq``."""
        return GraphView(self._state.upto(seq))


class GraphView(GraphReader):
    """A read-only graph, e.g. as of an earlier seq; its head is its newest root-chain tip."""

    def __init__(self, state: GraphState) -> None:
        self._state = state

    def default_head(self) -> str | None:
        for node_id in reversed(self._state.order):
            node = self._state.nodes[node_id]
            if node.kind != "tool":
                return node_id
        return None
