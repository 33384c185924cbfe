"""Mirror a framework's message history into a session's graph, and render it back.

Every adapter sees the framework's whole history as a list (a request's messages, or a
session's items) and converts each element to an OpenAI chat message — an :class:`Entry`
that also keeps the framework's own object. :meth:`Mirror.sync` appends what the graph
does not hold yet. Every step the mirror ever wrote is indexed by where it hangs (the node
before it) and the digest of its entry, so a history that extends any stored branch — not
only the last one written — resumes at its end and appends only what is new, however runs
through one adapter interleave; a history that went another way (an edited message, a
popped item) forks where it diverged, and nothing stored is ever lost.
:meth:`Mirror.render` renders the session under its budget and pairs each message with the
framework object it shows unchanged, so an adapter returns the framework's originals for
what compaction left alone and builds new objects only for what it changed.

The framework's instructions (a system prompt it sends beside the messages) are stored as a
system node where they first appear, and again where they change: the budget counts them,
``openprogram context`` shows them, and a render returns only the current ones.

The framework's tool call ids are kept. A graph call id differs when the framework reuses
one still pending in the session, or gives two calls of one message the same id (it then
gets a ``~N`` suffix, mapped back here); a rendered prompt never holds one id twice.
"""

from __future__ import annotations

import hashlib
import json
import operator
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import cast

from context import Rendered, same_prefix
from graph import ChatMessage, Node, Tool, ToolCall, ToolSchema, dialogue_message
from openprogram._runtime._config import ADAPTERS
from openprogram._runtime._session import Session
from openprogram.integrations._calls import CallPositions, call_counts, check_entries
from openprogram.integrations._entry import Entry, Paired
from openprogram.integrations._gc import freeze_once
from openprogram.integrations._heads import behind, move
from openprogram.integrations._models import record_model
from openprogram.integrations._pairing import Pairing
from openprogram.integrations._steps import Step as _Step
from openprogram.tracing import traced_render

__all__ = ["NAMESPACE", "Entry", "Mirror", "Paired"]

NAMESPACE = ADAPTERS
"""Store side-data namespace: one key per adapter, where its mirror started (JSON); its
steps are in ``integrations.<name>``, keyed by the node they hang on and their digest."""
SYSTEM = "@system"
"""The digest slot of an instructions step in the index (one per node it hangs on)."""
_NODE = operator.attrgetter("node")
MAX_PATHS = 64
"""How many stored paths a sync weighs where diverged histories wrote the same steps."""


class Mirror:
    """Keeps one session's graph in step with a framework's history lists."""

    def __init__(self, session: Session, name: str) -> None:
        self.session = session
        self.name = name
        self._lock = threading.RLock()
        self._index: dict[str, list[_Step]] | None = None
        self._systems: dict[str, list[_Step]] = {}
        """The instructions steps of the index, by the node they hang on (looked up at every
        step of every sync: most nodes have none)."""
        self._base: str | None = None
        self._path: list[_Step] = []
        self._system: list[_Step] = []
        self._at: str | None = None
        self._new: list[_Step] = []
        self._synced: tuple[list[str], int, str | None, str | None] | None = None
        """The last sync's digests, the graph's last record and head after it, and the
        mirror's head (the graph's may be further on: see ``behind``)."""
        self._shared = False
        """Whether diverged histories wrote one step twice (a key with several steps)."""
        self._calls = CallPositions()
        self._walked: tuple[list[_Step], list[tuple[int, _Step]]] = ([], [])
        """The path :meth:`_follow` last walked, and the changes of instructions on it,
        each with where it was followed (before which step; the one after its end not
        counted)."""
        self._digested: tuple[list[Entry], list[str]] = ([], [])
        """The last sync's entries and their digests."""
        self.last: Rendered | None = None
        """The last render (tokens, tiers, and the cache edits it asks the provider for)."""
        self._pairing = Pairing()

    # -- the steps this mirror wrote, persisted in the store -------------------------------
    @property
    def index(self) -> dict[str, list[_Step]]:
        """Every step written, by where it hangs and what it holds: a key has several steps
        where histories that diverged each wrote it (the newest last)."""
        if self._index is None:
            store, session = self.session.store, self.session.id
            stored = store.get_values(session, NAMESPACE, [self.name])
            if self.name in stored:
                raw = json.loads(stored[self.name])
                self._base = raw["base"]
                old = raw.get("steps", ())  # written before the index: one branch
            else:  # what the session held before the first entry stays before it
                self._base = self.session.graph.head
                old = ()
                store.put_values(session, NAMESPACE, {self.name: json.dumps({"base": self._base})})
            index: dict[str, list[_Step]] = {}
            parent = self._base
            for digest, node, head, calls in old:
                step = _Step(digest, node, head, parent, {k: [v] for k, v in calls.items()})
                index.setdefault(step.key, []).append(step)
                parent = head
            written = store.get_values(session, f"{NAMESPACE}.{self.name}")
            loaded = [_Step.load(text) for text in written.values()]
            for step in sorted(loaded, key=lambda step: step.head or ""):
                index.setdefault(step.key, []).append(step)
            self._index = index
            self._shared = any(len(steps) > 1 for steps in index.values())
            self._systems = {
                step.parent or "": steps
                for steps in index.values()
                for step in steps[:1]
                if step.digest == SYSTEM
            }
            self._at = self._base
        return self._index

    def _keep(self, step: _Step) -> _Step:
        steps = self.index.setdefault(step.key, [])
        steps.append(step)
        self._shared = self._shared or len(steps) > 1
        if step.digest == SYSTEM:
            self._systems[step.parent or ""] = steps
        self._new.append(step)
        return step

    def _save(self) -> None:
        if self._new:
            values = {f"{step.key}:{step.node}": step.dump() for step in self._new}
            self.session.store.put_values(self.session.id, f"{NAMESPACE}.{self.name}", values)
            self._new = []

    @property
    def head(self) -> str | None:
        """The node after the last entry mirrored (before the first: the session's head
        when the mirror started)."""
        self.index  # noqa: B018 (loads the base)
        return self._at

    def nodes(self) -> list[str]:
        """The node each entry of the last history mirrored made or filled, in order."""
        return list(map(_NODE, self._path))

    def warm(self) -> None:
        """Read the steps this mirror wrote now (the first request looks its history up in
        them), and set the objects the process holds aside from the garbage collector's full
        collections (see ``_gc``): an adapter's first request then costs what it does."""
        freeze_once()
        with self._lock:
            self.index  # noqa: B018 (loads the index)

    # -- writing ------------------------------------------------------------------------
    def sync(self, entries: Sequence[Entry], system: str | None = None) -> list[str]:
        """Make the graph hold ``entries`` (and ``system``, the framework's instructions)
        as the current branch: resume after the longest stored history they extend,
        append the rest; return the node of each entry."""
        with self._lock, self.writing():
            graph = self.session.graph
            graph.refresh()
            digests = self._digests(entries)
            resume = self._unchanged(digests)
            known = self._prefix(digests) if resume < 0 else None
            checked = len(known) if known is not None else resume
            check_entries(self.name, entries, start=max(checked, 0))
            if resume < 0:
                best: list[_Step] = []
                for path in [known] if known is not None else self._paths(digests):
                    self._path = path
                    resumable = self._resumable(entries, digests, len(path))
                    if resumable > resume:
                        best, resume = path, resumable
                self._follow(best[:resume])
            self._synced = None
            writes = resume < len(entries) or self._instructing(system) is not None
            if graph.head != self._at and (writes or not behind(graph, self._at)):
                move(graph, self._at)
            self._instructions(system)
            for entry, digest in zip(entries[resume:], digests[resume:], strict=True):
                step = self._keep(self._append(entry, digest))
                self._path.append(step)
                self._at = step.head
            self._save()
            self._synced = (digests, graph.state.last_seq, graph.head, self._at)
            return self.nodes()

    def _digests(self, entries: Sequence[Entry]) -> list[str]:
        """The digest of each entry: the last sync's for the very entries it started with."""
        last, digests = self._digested
        same = same_prefix(entries, last)
        digests = digests[:same]
        digests += [entry.digest for entry in entries[same:]]
        self._digested = (list(entries), digests)
        return digests

    @contextmanager
    def writing(self) -> Iterator[None]:
        """One transaction for a sync's reads and writes (the graph caught up, the head
        moved, the new nodes and their steps): a request commits once, not once per step.
        When it fails, nothing of it is stored, the graph's head is back where it was, and
        the index is read again."""
        try:
            with self.session.graph.batch():
                yield
        except BaseException:
            self._index, self._new, self._synced = None, [], None
            self._walked = ([], [])
            raise

    def _unchanged(self, digests: Sequence[str]) -> int:
        """How many of ``digests`` are the last sync's history, unchanged, with nothing
        written to the graph since (-1: not so; the stored paths are weighed instead). A
        framework that resends its whole history each call then costs one comparison of
        the digests, done in C, instead of a walk of the index and a replay of the calls."""
        if self._synced is None:
            return -1
        last, seq, graph_head, head = self._synced
        graph = self.session.graph
        if graph.state.last_seq != seq or graph.head != graph_head or self._at != head:
            return -1
        if self._shared or len(digests) < len(last) or digests[: len(last)] != last:
            return -1  # where diverged histories share steps, another path may go further
        if len(digests) > len(last) and (
            f"{head or ''}:{digests[len(last)]}" in self.index or self._system_step(head)
        ):
            return -1  # a stored step goes on from here
        return len(last)

    def _prefix(self, digests: Sequence[str]) -> list[_Step] | None:
        """The stored path of ``digests`` when they share a start with the last sync's
        history, nothing was written since and no two histories share a step: the one
        path :meth:`_paths` would find, the shared start taken from the last sync instead
        of walked again (a framework that resends one history with a new question, or
        the stored answer of its last request, each call)."""
        if self._synced is None or self._shared:
            return None
        last, seq, graph_head, head = self._synced
        graph = self.session.graph
        if graph.state.last_seq != seq or graph.head != graph_head or self._at != head:
            return None
        same = min(len(digests), len(last))
        if last[:same] != list(digests[:same]):
            return None
        path = self._path[:same]
        if same == len(digests):
            return path
        return self._paths(digests, (path[-1].head if path else self._base, path))[0]

    def _paths(
        self, digests: Sequence[str], start: tuple[str | None, list[_Step]] | None = None
    ) -> list[list[_Step]]:
        """The stored paths ``digests`` follow from the base (or from ``start``: a node
        and the path that led there), each as far as it goes: one per choice where
        diverged histories wrote the same step (the newest first, at most ``MAX_PATHS``)."""
        index, graph = self.index, self.session.graph
        found: list[list[_Step]] = []
        # Depth-first, newest choice first, without recursion: a history of thousands of
        # entries is as deep as it is long.
        stack: list[tuple[str | None, list[_Step]]] = [start or (self._base, [])]
        while stack and len(found) < MAX_PATHS:
            parent, path = stack.pop()
            while True:
                system = self._system_step(parent)
                parent = system.head if system is not None else parent
                steps: list[_Step] = []
                if len(path) < len(digests):
                    key = f"{parent or ''}:{digests[len(path)]}"
                    steps = [s for s in reversed(index.get(key, ())) if s.node in graph]
                if not steps:
                    found.append(path)
                    break
                stack.extend((step.head, [*path, step]) for step in reversed(steps[1:]))
                path.append(steps[0])
                parent = steps[0].head
        return found

    def _follow(self, steps: Sequence[_Step]) -> None:
        """Stand after ``steps`` and the changes of instructions on their way (one after
        the last step included). The start ``steps`` share with the path the last call
        walked (the very steps, found in C) is not walked again: instructions are only
        ever written after the end of the path walked (or beyond it), so the changes on
        that start are the ones found then, at the same places (those from its end on are
        looked up again)."""
        walked, found = self._walked
        same = same_prefix(steps, walked)
        kept = [(at, step) for at, step in found if at < same]
        self._path, self._system = list(steps[:same]), [step for _, step in kept]
        parent = steps[same - 1].head if same else self._base
        systems = self._systems if self._index is not None else None
        for step in steps[same:]:
            if systems is None or (parent or "") in systems:  # most nodes have none
                system = self._system_step(parent)
                if system is not None:
                    self._system.append(system)
                    kept.append((len(self._path), system))
                    parent = system.head
            self._path.append(step)
            parent = step.head
        self._walked = (list(self._path), kept)
        self._at = self._follow_system(parent)

    def _system_step(self, parent: str | None) -> _Step | None:
        self.index  # noqa: B018 (loads the index)
        steps = self._systems.get(parent or "")
        if not steps:
            return None
        graph = self.session.graph
        return next((s for s in reversed(steps) if s.node in graph), None)

    def _follow_system(self, parent: str | None) -> str | None:
        step = self._system_step(parent)
        if step is None:
            return parent
        self._system.append(step)
        return step.head

    def _instructing(self, system: str | None) -> str | None:
        """The digest of ``system`` when it is not the current instructions yet."""
        if system is None:
            return None
        digest = hashlib.sha256(system.encode()).hexdigest()[:32]
        current = self._system[-1] if self._system else None
        graph = self.session.graph
        if current is not None and graph.get(current.node).meta.get("instructions") == digest:
            return None
        return digest

    def _instructions(self, system: str | None) -> None:
        """Append the instructions where they are not the current ones yet."""
        digest = self._instructing(system)
        if system is None or digest is None:
            return
        graph = self.session.graph
        node = graph.append(
            {"role": "system", "content": system},
            meta={"integration": self.name, "instructions": digest},
        )
        self._system.append(self._keep(_Step(SYSTEM, node.id, graph.head, self._at)))
        self._at = graph.head

    def _resumable(self, entries: Sequence[Entry], digests: Sequence[str], same: int) -> int:
        """Where appending may resume: at ``same`` or before it, so that every call the
        kept entries leave unanswered is unanswered in the graph too (a result the
        framework dropped or replaced means asking the call again on a new branch)."""
        marked = self._calls.among(entries, digests, same)
        while True:
            pending: dict[str, tuple[int, int]] = {}  # call id -> (its message, unanswered)
            for index in marked:
                if index >= same:
                    break
                message = entries[index].message
                if message.get("tool_calls"):
                    for call_id, count in call_counts(message).items():
                        pending[call_id] = (index, count)
                if message.get("role") == "tool":
                    call_id = str(message.get("tool_call_id"))
                    if call_id in pending:
                        at, count = pending.pop(call_id)
                        if count > 1:
                            pending[call_id] = (at, count - 1)
            back = same
            for call_id, (index, count) in pending.items():
                if self._answered(index, call_id, count):
                    back = min(back, index)
            if back == same:
                return same
            same = back

    def _answered(self, index: int, call_id: str, unanswered: int) -> bool:
        """Whether any of the last ``unanswered`` calls ``call_id`` of step ``index`` has a
        result in the graph (or is gone)."""
        if index >= len(self._path):
            return False
        step = self._path[index]
        graph_ids = step.calls.get(call_id, [call_id])
        for graph_id in graph_ids[len(graph_ids) - unanswered :]:
            tool = self._tool(step.node, graph_id)
            if tool is None or tool.result is not None:
                return True
        return False

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
        parent = graph.head
        message = entry.message.copy()
        meta = {"integration": self.name, **entry.meta}
        if message.get("role") == "tool":
            return self._answer(message, digest, parent)
        calls: dict[str, list[str]] = {}
        if message.get("tool_calls"):
            pending = graph.state.pending
            taken: set[str] = set()
            renamed: list[ToolCall] = []
            for call in message["tool_calls"]:
                graph_id, n = call["id"], 1
                while graph_id in pending or graph_id in taken:
                    n += 1
                    graph_id = f"{call['id']}~{n}"
                taken.add(graph_id)
                calls.setdefault(call["id"], []).append(graph_id)
                renamed.append({**call, "id": graph_id})
            message["tool_calls"] = renamed
            moved = {g: f for f, gs in calls.items() for g in gs if g != f}
            if moved:  # the framework's own ids of the calls stored under another
                meta["call_ids"] = moved
        node = graph.append(message, meta=meta)
        return _Step(digest, node.id, graph.head, parent, calls)

    def _answer(self, message: ChatMessage, digest: str, parent: str | None) -> _Step:
        graph = self.session.graph
        framework_id = message["tool_call_id"]
        for step in reversed(self._path):
            if framework_id in step.calls:
                for graph_id in step.calls[framework_id]:
                    tool = self._tool(step.node, graph_id)
                    if tool is not None and tool.result is None:
                        graph.append({**message, "tool_call_id": graph_id})
                        return _Step(digest, tool.id, graph.head, parent)
                break
        # A result that answers no pending call: keep it, after a synthetic call.
        # no arguments: the graph stores "{}" for them
        call = cast(
            "ToolCall", {"id": framework_id, "type": "function", "function": {"name": "unknown"}}
        )
        synthetic = self._append(
            Entry({"role": "assistant", "content": None, "tool_calls": [call]}), digest
        )
        graph_id = synthetic.calls[framework_id][0]
        graph.append({**message, "tool_call_id": graph_id})
        tool = self._tool(synthetic.node, graph_id)
        assert tool is not None
        return _Step(digest, tool.id, graph.head, parent, synthetic.calls)

    # -- reading ------------------------------------------------------------------------
    def render(
        self,
        entries: Sequence[Entry],
        tools: Sequence[ToolSchema] = (),
        system: str | None = None,
        *,
        conversation: str | None = None,
        model: str | None = None,
    ) -> list[Paired]:
        """Sync ``entries`` (and ``system``), render the session from their last node under
        its budget (``tools``: the schemas the request goes out with, counted in the
        budget), and pair each rendered message with the entry it shows unchanged
        (:attr:`last` is the whole render: tokens, tiers, cache edits). ``conversation``:
        the framework's conversation id, for the render's span; ``model``: the name of the
        model the request goes to, recorded in the session's configuration first (its
        window and tokenizer then count this render)."""
        with self._lock:
            record_model(self.session, model)
            self.sync(entries, system)
            engine = self.session.engine
            engine.count_as_sent()  # the framework writes each request out as JSON
            if tools:
                engine.set_tools(list(tools))
            head = self.head
            self.last = traced_render(
                lambda: engine.render(head=head), self.session.id, conversation=conversation
            )
            return self._pair(self.last, entries)

    def _pair(self, rendered: Rendered, entries: Sequence[Entry]) -> list[Paired]:
        """Each rendered message with the entry it shows unchanged (see ``Pairing``); only the
        current instructions of those this history stored go out."""
        graph = self.session.graph
        current = [s.node for s in self._system[-1:]]
        instructions = [dialogue_message(graph.get(node)) for node in current]
        superseded = {s.node for s in self._system[:-1]} - set(current)
        return self._pairing.pair(rendered, entries, self._path, (instructions, superseded))
