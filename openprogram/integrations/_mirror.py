"""Mirror a framework's message history into a session's graph, and render it back.

Every adapter sees the framework's whole history as a list (a request's messages, or a
session's items) and converts each element to an OpenAI chat message — an :class:`Entry`
that also keeps the framework's own object. :meth:`Mirror.sync` appends what the graph
does not hold yet: the list and the branch the mirror wrote last share a prefix (compared
by digests), the rest is appended after it, and when the framework's history went another
way (an edited history, a popped item) the graph forks there instead, so nothing stored is
ever lost. :meth:`Mirror.render` renders the session under its budget and pairs each
message with the framework object it shows unchanged, so an adapter returns the
framework's originals for what compaction left alone and builds new objects only for
what it changed.

The framework's tool call ids are kept: a graph call id differs only when the framework
reuses one still pending in the session (it then gets a ``~N`` suffix, mapped back here).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from context import Rendered
from graph import Node, Tool, dialogue_message, tool_call, tool_result_message
from openprogram.tracing import traced_render

if TYPE_CHECKING:
    from openprogram._session import Session

__all__ = ["NAMESPACE", "Entry", "Mirror", "Paired"]

NAMESPACE = "integrations"
"""Store side-data namespace: one key per adapter, the branch it mirrors (JSON)."""


@dataclass(frozen=True)
class Entry:
    """One element of a framework's history as an OpenAI chat message.

    ``message`` carries the framework's own tool call ids; ``original`` is the framework's
    object (returned as is while compaction leaves it alone); ``meta`` goes into the node's
    meta (the framework's ids, usage, model).
    """

    message: dict[str, Any]
    original: Any = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        text = json.dumps(self.message, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Paired:
    """A rendered message (with the framework's call ids) and the entry it shows unchanged,
    or ``None`` when compaction changed or made it (a summary, a cleared output, a note)."""

    message: dict[str, Any]
    entry: Entry | None


@dataclass
class _Step:
    """What the mirror wrote for one entry: its digest, the node it made or filled (a tool
    node for a result), the head after it, and graph call ids for its framework ones."""

    digest: str
    node: str
    head: str | None
    calls: dict[str, str] = field(default_factory=dict)

    def dump(self) -> list[Any]:
        return [self.digest, self.node, self.head, self.calls]

    @classmethod
    def load(cls, value: list[Any]) -> _Step:
        return cls(str(value[0]), str(value[1]), value[2], dict(value[3]))


class Mirror:
    """Keeps one session's graph in step with a framework's history list."""

    def __init__(self, session: Session, name: str) -> None:
        self.session = session
        self.name = name
        self._lock = threading.RLock()
        self._branch: list[_Step] | None = None
        self._base: str | None = None
        self.last: Rendered | None = None
        """The last render (tokens, tiers, and the cache edits it asks the provider for)."""

    # -- the branch this mirror wrote, persisted in the store ------------------------------
    @property
    def branch(self) -> list[_Step]:
        if self._branch is None:
            stored = self.session.store.get_values(self.session.id, NAMESPACE, [self.name])
            if self.name in stored:
                raw = json.loads(stored[self.name])
                self._base = raw["base"]
                self._branch = [_Step.load(v) for v in raw["steps"]]
            else:  # what the session held before the first entry stays before it
                self._base = self.session.graph.head
                self._branch = []
        return self._branch

    def _save(self) -> None:
        steps = [step.dump() for step in self.branch]
        text = json.dumps({"base": self._base, "steps": steps})
        self.session.store.put_values(self.session.id, NAMESPACE, {self.name: text})

    @property
    def head(self) -> str | None:
        """The node after the last entry mirrored (before the first: the session's head
        when the mirror started)."""
        branch = self.branch
        return branch[-1].head if branch else self._base

    def nodes(self) -> list[str]:
        """The node each mirrored entry made or filled, in order."""
        return [step.node for step in self.branch]

    # -- writing ------------------------------------------------------------------------
    def sync(self, entries: Sequence[Entry]) -> list[str]:
        """Make the graph hold ``entries`` as the current branch: append what is new, fork
        where the framework's history diverged from what was mirrored; return the node of
        each entry."""
        with self._lock:
            graph = self.session.graph
            graph.refresh()
            branch = self.branch
            digests = [entry.digest for entry in entries]
            same = 0
            while same < min(len(branch), len(digests)) and branch[same].digest == digests[same]:
                same += 1
            same = self._resumable(entries, same)
            changed = same < len(branch) or same < len(entries)
            if changed or graph.head != self.head:
                self._move(same)
            del branch[same:]
            for entry, digest in zip(entries[same:], digests[same:], strict=True):
                branch.append(self._append(entry, digest))
            if changed:
                self._save()
            return [step.node for step in branch]

    def _move(self, keep: int) -> None:
        """Put the graph's head after the first ``keep`` mirrored entries."""
        graph = self.session.graph
        head = self.branch[keep - 1].head if keep else self._base
        if head is None:
            if graph.head is not None:
                graph.restart()
        elif graph.head != head:
            graph.fork(head)

    def _resumable(self, entries: Sequence[Entry], same: int) -> int:
        """Where appending may resume: at ``same`` or before it, so that every call the
        kept entries leave unanswered is unanswered in the graph too (a result the
        framework dropped or replaced means asking the call again on a new branch)."""
        while True:
            pending: dict[str, int] = {}
            for index, entry in enumerate(entries[:same]):
                for call in entry.message.get("tool_calls") or ():
                    pending[call["id"]] = index
                if entry.message.get("role") == "tool":
                    pending.pop(str(entry.message.get("tool_call_id")), None)
            back = same
            for call_id, index in pending.items():
                if self._answered(index, call_id):
                    back = min(back, index)
            if back == same:
                return same
            same = back

    def _answered(self, index: int, call_id: str) -> bool:
        if index >= len(self.branch):
            return False
        step = self.branch[index]
        tool = self._tool(step.node, step.calls.get(call_id, call_id))
        return tool is None or tool.result is not None

    def _tool(self, assistant: str, graph_call_id: str) -> Node | None:
        graph = self.session.graph
        if assistant not in graph:
            return None
        for tool in graph.tools(assistant):
            if isinstance(tool.payload, Tool) and tool.payload.call_id == graph_call_id:
                return tool
        return None

    def _append(self, entry: Entry, digest: str) -> _Step:
        graph = self.session.graph
        message = dict(entry.message)
        meta = {"integration": self.name, **entry.meta}
        if message.get("role") == "tool":
            return self._answer(message, digest)
        calls: dict[str, str] = {}
        if message.get("tool_calls"):
            pending = graph.state.pending
            renamed = []
            for call in message["tool_calls"]:
                graph_id, n = call["id"], 1
                while graph_id in pending or graph_id in calls.values():
                    n += 1
                    graph_id = f"{call['id']}~{n}"
                calls[call["id"]] = graph_id
                renamed.append({**call, "id": graph_id})
            message["tool_calls"] = renamed
        node = graph.append(message, meta=meta)
        return _Step(digest, node.id, graph.head, calls)

    def _answer(self, message: dict[str, Any], digest: str) -> _Step:
        graph = self.session.graph
        framework_id = message["tool_call_id"]
        for step in reversed(self.branch):
            if framework_id in step.calls:
                tool = self._tool(step.node, step.calls[framework_id])
                if tool is not None and tool.result is None:
                    graph.append({**message, "tool_call_id": step.calls[framework_id]})
                    return _Step(digest, tool.id, graph.head)
                break
        # A result that answers no pending call: keep it, after a synthetic call.
        call = {"id": framework_id, "type": "function", "function": {"name": "unknown"}}
        synthetic = self._append(
            Entry({"role": "assistant", "content": None, "tool_calls": [call]}),
            digest,
        )
        graph_id = synthetic.calls[framework_id]
        graph.append({**message, "tool_call_id": graph_id})
        tool = self._tool(synthetic.node, graph_id)
        assert tool is not None
        return _Step(digest, tool.id, graph.head, synthetic.calls)

    # -- reading ------------------------------------------------------------------------
    def render(
        self,
        entries: Sequence[Entry],
        tools: Sequence[dict[str, Any]] = (),
        *,
        conversation: str | None = None,
    ) -> list[Paired]:
        """Sync ``entries``, render the session from their last node under its budget
        (``tools``: the schemas the request goes out with, counted in the budget), and pair
        each rendered message with the entry it shows unchanged (:attr:`last` is the whole
        render: tokens, tiers, cache edits). ``conversation``: the framework's conversation
        id, for the render's span."""
        with self._lock:
            self.sync(entries)
            engine = self.session.engine
            if tools:
                engine.set_tools(list(tools))
            head = self.head
            self.last = traced_render(
                lambda: engine.render(head=head), self.session.id, conversation=conversation
            )
            return self._pair(self.last, entries)

    def _pair(self, rendered: Rendered, entries: Sequence[Entry]) -> list[Paired]:
        graph = self.session.graph
        branch = self.branch
        unchanged: dict[str, deque[Entry]] = {}
        framework_ids: dict[str, str] = {}
        for step, entry in zip(branch, entries, strict=False):
            for framework_id, graph_id in step.calls.items():
                framework_ids[graph_id] = framework_id
            if step.node not in graph:
                continue
            node = graph.get(step.node)
            shown = _full_message(graph, node) if entry.message.get("role") != "tool" else None
            if entry.message.get("role") == "tool" and node.kind == "tool":
                shown = tool_result_message(node)
            if shown is not None:
                unchanged.setdefault(_key(shown), deque()).append(entry)
        paired = []
        for message in rendered.messages:
            candidates = unchanged.get(_key(message))
            shows = candidates.popleft() if candidates else None
            paired.append(Paired(_framework_ids(message, framework_ids), shows))
        return paired


def _full_message(graph: Any, node: Node) -> dict[str, Any] | None:
    if node.kind != "dialogue":
        return None
    message = dialogue_message(node)
    tools = graph.tools(node.id)
    if tools:
        message["tool_calls"] = [tool_call(t) for t in tools]
    return message


def _key(message: dict[str, Any]) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)


def _framework_ids(message: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    if message.get("role") == "tool":
        call_id = message.get("tool_call_id")
        if call_id in ids:
            return {**message, "tool_call_id": ids[call_id]}
        return message
    if message.get("tool_calls"):
        calls = [{**c, "id": ids.get(c["id"], c["id"])} for c in message["tool_calls"]]
        return {**message, "tool_calls": calls}
    return message
