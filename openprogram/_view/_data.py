"""What the viewer reads: sessions, the prompts they sent, layers, functions, records.

Everything comes through the public API and the helpers the CLI stands on (``engine_for``,
``sent_prompt``, ``layer_savings``, ``fired_by_frame``), opened read-only: looking at a
session never changes what its agent sends. A session's graph and engine are loaded once
and refreshed (what other processes appended) on each request; the cheap facts — the
session list, the receipts of its calls, its records — never load a graph, so a long
session's first page does not wait for its 100,000 nodes.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import msgspec

from context import (
    CompactionRecord,
    ContextEngine,
    ContextStorage,
    LayerFacts,
    Rendered,
    RenderReceipt,
    RollbackFacts,
    SentPrompt,
    TokenCounter,
    render_receipt,
    sent_prompt,
)
from graph import (
    AUDIT,
    ChatMessage,
    ConversationGraph,
    LayerInfo,
    Node,
    Store,
    StoreError,
    resolve_ref,
)
from openprogram import _service as service
from openprogram._view._facts import (
    KINDS,
    Call,
    Prompt,
    SentParts,
    SessionRow,
    records_by_call,
)
from openprogram._view._layer_data import LayerTotals, Originals
from openprogram._view._provenance import provenance, shown_in
from openprogram._view._search import NodeSearch

BRANCHES = "graph.branches"
TOKENS_KEPT = 200_000
"""Messages whose tokens the viewer keeps (the counter is the session's; one viewer)."""
LAYERS_KEPT = 4
"""Layers whose originals the viewer keeps indexed, so paging through one is a slice."""


class Viewer:
    """One database's sessions as the web app reads them (thread-safe: one lock).

    ``db``: a store URL or a path (``None``: the default database); ``state_dir``: the state
    folder beside it (``None``: the store's own)."""

    def __init__(self, db: str | None, state_dir: str | None = None, *, allow_write: bool = False):
        self.db = db
        self.state_dir = state_dir
        self.allow_write = allow_write
        self.lock = threading.RLock()
        self.store: Store = service.open_store(db, create=False, read_only=True)
        self._loaded: dict[str, tuple[ConversationGraph, ContextEngine]] = {}
        self._kinds: dict[tuple[str, int], dict[str, int]] = {}
        self._storages: dict[str, ContextStorage] = {}
        self._layer_memo: dict[tuple[str, str], Originals] = {}
        self.totals = LayerTotals(self.lock)
        self._prefetching: dict[str, threading.Thread] = {}
        self._prefetching_lock = threading.Lock()
        self.count_totals = True
        """Count the totals of a layer whose maker kept none when its page is asked for (a
        static export, done before they would be, does not)."""
        self._receipts: dict[str, tuple[str, list[RenderReceipt]]] = {}
        self._tokens: dict[bytes, int] = {}
        self._shown: dict[str, tuple[tuple[str, int], dict[str, str]]] = {}
        self._parts = SentParts()
        self._search = NodeSearch()

    @property
    def state_path(self) -> Path:
        return service.folder_of(self.store, self.state_dir).path

    def storage(self, session: str) -> ContextStorage:
        if session not in self._storages:
            self._storages[session] = ContextStorage(
                self.store, session, service.folder_of(self.store, self.state_dir)
            )
        return self._storages[session]

    def sessions(self, query: str = "") -> list[SessionRow]:
        """Every session (or those whose id contains ``query``), newest activity first,
        from the store's session table and side tables only (no graph is loaded)."""
        rows = []
        for info in self.store.sessions():
            if query and query.lower() not in info.id.lower():
                continue
            receipts = self.receipts(info.id)
            records = self.records(info.id)
            facts = [r.facts for r in records]
            made = {f.layer for f in facts if isinstance(f, LayerFacts) and f.layer}
            undone = {x for f in facts if isinstance(f, RollbackFacts) for x in f.layers}
            moments = [info.created.isoformat(timespec="seconds")]
            moments += [r.at[:19] for r in receipts[-1:]] + [r.timestamp[:19] for r in records[-1:]]
            rows.append(
                SessionRow(
                    id=info.id,
                    nodes=info.nodes,
                    created=info.created.strftime("%Y-%m-%d %H:%M:%S"),
                    last_activity=max(moments)[:19].replace("T", " "),
                    branches=1 + len(self._branch_heads(info.id)),
                    layers_active=len(made - undone),
                    layers_made=len(made),
                    calls=len(receipts),
                )
            )
        return sorted(rows, key=lambda row: row.last_activity, reverse=True)

    def _branch_heads(self, session: str) -> dict[str, str]:
        try:
            return self.store.get_values(session, BRANCHES)
        except StoreError:
            return {}

    def receipts(self, session: str) -> list[RenderReceipt]:
        """The session's receipts, decoded once: the log only grows, so while its last
        receipt is the same so is the list (a long session's 1,000 receipts, each with
        its sources, take a second to decode)."""
        try:
            storage = self.storage(session)
            last = storage.last_receipt()
            kept = self._receipts.get(session)
            if kept is not None and last is not None and kept[0] == last.id:
                return kept[1]
            found = storage.receipts()
        except StoreError:
            return []
        if last is not None and found and found[-1].id == last.id:
            self._receipts[session] = (last.id, found)
        return found

    def records(self, session: str) -> list[CompactionRecord]:
        try:
            return self.storage(session).read_records()
        except StoreError:
            return []

    def loaded(self, session: str) -> tuple[ConversationGraph, ContextEngine]:
        """The session's graph and engine, loaded once and caught up on every call."""
        with self.lock:
            if session not in self._loaded:
                if not self.store.has_session(session):
                    raise KeyError(session)
                graph = ConversationGraph(self.store, session)
                self._loaded[session] = (graph, service.engine_for(graph, state_dir=self.state_dir))
            graph, engine = self._loaded[session]
            graph.refresh()
            return graph, engine

    def forget(self, session: str) -> None:
        """Let go of a session's graph and what was kept of it (the export, done with it)."""
        with self.lock:
            self._loaded.pop(session, None)
            self._shown.pop(session, None)
            self._search.forget(session)
            for key in [k for k in self._layer_memo if k[0] == session]:
                del self._layer_memo[key]

    def prefetch(self, session: str) -> None:
        """Load the session's graph on a thread of its own: its timeline needs none, the
        pages a reader opens from it (prompt, layers, search) do, and 100,000 nodes take
        seconds to load."""
        with self._prefetching_lock:
            if session in self._loaded or session in self._prefetching:
                return
            thread = threading.Thread(target=self._prefetch, args=(session,), daemon=True)
            self._prefetching[session] = thread
            thread.start()

    def _prefetch(self, session: str) -> None:
        try:
            graph, _ = self.loaded(session)
            with self.lock:
                self._search.prepare(session, graph)  # what a search reads
        except (KeyError, StoreError):  # deleted meanwhile: the next page says so
            pass
        finally:
            with self._prefetching_lock:
                self._prefetching.pop(session, None)

    def version(self, session: str) -> str:
        """What changes when anything is stored for the session (the live view polls it)."""
        receipts = self.receipts(session)
        records = self.records(session)
        nodes = next((i.nodes for i in self.store.sessions() if i.id == session), 0)
        last = receipts[-1].id if receipts else ""
        scrubs = len(self.store.read_log(session, AUDIT))  # a scrub rewrote what it shows
        return f"{nodes}.{len(receipts)}.{last}.{len(records)}.{scrubs}"

    # --- calls and prompts -------------------------------------------------------------

    def calls(self, session: str, page: int, size: int, *, kinds: bool) -> tuple[list[Call], int]:
        """One page of the timeline and the number of calls; ``kinds`` renders each call on
        the page again to stack its tokens by kind (cached per receipt and layer state)."""
        receipts = self.receipts(session)
        records = self.records(session)
        start = page * size
        chosen = receipts[start : start + size]
        compactions = records_by_call(receipts, records)
        found = []
        for offset, receipt in enumerate(chosen):
            number = start + offset
            by_kind = self.by_kind(session, receipt) if kinds else self._cached(session, receipt)
            found.append(Call(number, receipt, by_kind, compactions.get(number, [])))
        return found, len(receipts)

    def _cached(self, session: str, receipt: RenderReceipt) -> dict[str, int] | None:
        loaded = self._loaded.get(session)
        if loaded is None:
            return None
        key = (receipt.id, 0 if receipt.message_digests else len(loaded[0].events()))
        return self._kinds.get(key)

    def by_kind(self, session: str, receipt: RenderReceipt) -> dict[str, int]:
        """A call's prompt by kind: from its receipt's messages and sources when it kept
        them, else from the prompt rendered again."""
        with self.lock:
            graph, engine = self.loaded(session)
            key = (receipt.id, 0 if receipt.message_digests else len(graph.events()))
            if key not in self._kinds:
                sent = self._parts.by_kind(self.storage(session), receipt, engine.counter)
                self._kinds[key] = sent or self.prompt(session, receipt.id).by_kind
            return self._kinds[key]

    def receipt(self, session: str, receipt_id: str | None) -> RenderReceipt:
        receipts = self.receipts(session)
        if not receipts:
            raise KeyError(f"session {session} has sent no prompt yet")
        if receipt_id is None:
            return receipts[-1]
        for receipt in receipts:
            if receipt.id == receipt_id:
                return receipt
        raise KeyError(f"no call {receipt_id} in session {session}")

    def prompt(self, session: str, receipt_id: str | None = None) -> Prompt:
        """A call's prompt as sent: its messages read back from its receipt, counted with
        the session's own counter (the numbers ``openprogram context --json`` reports for
        the last one), and the tiers its render's compaction records name; a receipt
        written before messages were kept is rendered again from it. For a session that
        has sent none (an imported trace), its next prompt, as ``context`` shows it."""
        with self.lock:
            graph, engine = self.loaded(session)
            receipt, rendered, exact = self._rendered(session, receipt_id)
            rows = list(provenance(graph, rendered, engine, count=self.count_message))
            by_kind: dict[str, int] = dict.fromkeys(KINDS, 0)
            for row in rows:
                by_kind[row.kind] += row.tokens
            by_kind["tool schemas"] = max(0, rendered.tokens - sum(by_kind.values()))
            tiers = list(dict.fromkeys(a.tier for a in rendered.actions))
            if exact is not None and receipt is not None:
                receipts = self.receipts(session)
                number = next(i for i, r in enumerate(receipts) if r.id == receipt.id)
                made = records_by_call(receipts, self.records(session)).get(number, [])
                tiers = list(dict.fromkeys(r.tier for r in made))
            return Prompt(
                receipt, rows, by_kind, rendered.tokens, rendered.budget, tiers, exact is not None
            )

    def count_message(self, message: ChatMessage, counter: TokenCounter) -> int:
        """``counter.count_message``, each message counted once: a session's prompts
        share most of their messages (the history they all start with)."""
        key = msgspec.json.encode(message)
        found = self._tokens.get(key)
        if found is None:
            if len(self._tokens) > TOKENS_KEPT:
                self._tokens.clear()
            found = self._tokens[key] = counter.count_message(message)
        return found

    def _rendered(
        self, session: str, receipt_id: str | None
    ) -> tuple[RenderReceipt | None, Rendered, SentPrompt | None]:
        """A call's prompt (the last one's by default; none sent: the next one) and
        whether it is the one kept as sent."""
        _, engine = self.loaded(session)
        if receipt_id is None and not self.receipts(session):
            return None, engine.preview(), None  # as `context` shows it
        receipt = self.receipt(session, receipt_id)
        exact = sent_prompt(self.storage(session), receipt)
        return receipt, exact or render_receipt(engine, receipt), exact

    def shown(self, session: str) -> dict[str, str]:
        """How the last prompt (none sent: the next) shows each node it holds, read from
        its sources: ``shown``, ``offloaded``, another placeholder's variant, or the
        layer over it; a node it does not name is not in it. Kept until a call or an
        append changes it."""
        with self.lock:
            graph, _ = self.loaded(session)
            receipts = self.receipts(session)
            version = (receipts[-1].id if receipts else "", len(graph.events()))
            kept = self._shown.get(session)
            if kept is not None and kept[0] == version:
                return kept[1]
            _, rendered, _ = self._rendered(session, None)
            found = shown_in(rendered, graph.layers())
            self._shown[session] = (version, found)
            return found

    # --- layers --------------------------------------------------------------------------

    def layers(self, session: str) -> list[LayerInfo]:
        graph, _ = self.loaded(session)
        return graph.layers()

    def layer(self, session: str, layer_id: str, page: int = 0, size: int = 50) -> dict[str, Any]:
        """A layer before and after: one page of the originals it covers (``size``
        entries a page: a message or call, with its tool results), its replacement, its
        totals and tokens saved (None while counted: see ``_layer_data``), the layers
        built on it, its anchors (from its compaction record). Raises ``KeyError`` for a
        page past the last."""
        with self.lock:
            graph, engine = self.loaded(session)
            info = graph.layer(layer_id)
            originals = self._originals(session, info)
            pages = max(1, -(-len(originals.starts) // size))
            if page >= pages:
                raise KeyError(
                    f"no page {page} of layer {layer_id}: pages go from 0 to {pages - 1}"
                )
            counter = engine.counter
            shown = originals.messages(page * size, size)
            replacement = info.layer.replacement
            after = (
                [(m, counter.count_message(m)) for m in replacement]
                if isinstance(replacement, list)
                else []
            )
            totals = self.totals.get(session, info, originals, counter, start=self.count_totals)
            before = None if totals is None else totals.tokens
            record = next((r for r in self.records(session) if _made(r, layer_id)), None)
            return {
                "info": info,
                "originals": [(m, counter.count_message(m)) for m in shown],
                "count": len(originals.starts),
                "messages": None if totals is None else totals.messages,
                "page": page,
                "pages": pages,
                "first": page * size,
                "size": size,
                "before": before,
                "replacement": after,
                "saved": None if before is None else max(0, before - sum(t for _, t in after)),
                "built_on_it": [x for x in graph.layers() if layer_id in x.builds_on],
                "builds_on": list(info.layer.builds_on),
                "anchors": (record.anchors if record is not None else None) or {},
                "record": record,
            }

    def _originals(self, session: str, info: LayerInfo) -> Originals:
        """A layer's originals as pages, kept for the few layers viewed last: what a layer
        covers never changes."""
        key = (session, info.id)
        if key not in self._layer_memo:
            graph, _ = self.loaded(session)
            self._layer_memo[key] = Originals(graph, info)
            while len(self._layer_memo) > LAYERS_KEPT:
                self._layer_memo.pop(next(iter(self._layer_memo)))
        return self._layer_memo[key]

    def takes_with_it(self, session: str, layer_id: str) -> list[LayerInfo]:
        """The active layers a rollback of ``layer_id`` also ends (those built on it, and
        on those), as ``engine.rollback`` does."""
        graph, _ = self.loaded(session)
        active = [x for x in graph.layers() if x.active]
        taken: set[str] = {layer_id}
        grew = True
        while grew:
            grew = False
            for layer in active:
                if layer.id not in taken and taken & set(layer.layer.builds_on):
                    taken.add(layer.id)
                    grew = True
        return [x for x in active if x.id in taken and x.id != layer_id]

    def rollback(self, session: str, layer_id: str) -> tuple[list[str], int, int]:
        """Roll a layer back (what ``openprogram rollback`` does) on a writable store:
        the layers ended, and the next prompt's tokens before and after."""
        if not self.allow_write:
            raise PermissionError("the viewer was started without --allow-write")
        with self.lock:
            store = service.open_store(self.db, create=False)
            try:
                graph = ConversationGraph(store, session)
                engine = service.engine_for(graph, state_dir=self.state_dir)
                before = engine.preview().tokens
                done = engine.rollback(layer_id, reason="rolled back in openprogram view")
                after = engine.preview().tokens
                engine.close()
            finally:
                store.close()
            self._loaded.pop(session, None)
            return [x.id for x in done], before, after

    def rolled_back(self, session: str, layer_id: str) -> tuple[list[str], int, int] | None:
        """What the last rollback of ``layer_id`` did, from its record: the layers it
        ended, and the next prompt's tokens before and after (None: never rolled back)."""
        for record in reversed(self.records(session)):
            facts = record.facts
            if not isinstance(facts, RollbackFacts):
                continue
            asked = facts.layer or (facts.layers[0] if facts.layers else None)
            if asked == layer_id:
                return list(facts.layers), record.tokens_before, record.tokens_after
        return None

    # --- functions, records, search ------------------------------------------------------

    def functions(self, session: str) -> list[tuple[int, Node, dict[str, int]]]:
        """Function nodes in call order with their depth and the tiers fired in each."""
        from openprogram._reports._views import fired_by_frame

        graph, _ = self.loaded(session)
        fired = fired_by_frame(graph, self.records(session))
        caller = graph.state.caller
        found = []
        for node in graph.nodes():
            if node.kind != "function":
                continue
            depth, up = 0, caller.get(node.id)
            while up is not None:
                depth += graph.get(up).kind == "function"
                up = caller.get(up)
            found.append((depth, node, dict(fired.get(node.id, {}))))
        return found

    def expand(self, session: str, node_id: str) -> list[ChatMessage]:
        with self.lock:
            _, engine = self.loaded(session)
            return engine.expand(node_id, depth=1)

    def stored_id(self, session: str, ref: str) -> str:
        """The id a URL's node or layer part names: an id, or the handle a prompt shows
        (``n42``, ``fn_42``, ``L3``); anything else as it is (the page says not found)."""
        graph, _ = self.loaded(session)
        return resolve_ref(graph.state, ref) or ref

    def search(self, session: str, query: str, limit: int) -> tuple[list[tuple[Node, str]], int]:
        """Nodes whose text contains ``query`` (case-insensitive), every node searched —
        those under layers too (``NodeSearch``)."""
        graph, _ = self.loaded(session)
        return self._search.find(session, graph, query, limit)

    def nodes(self, session: str, page: int, size: int) -> tuple[list[Node], int]:
        graph, _ = self.loaded(session)
        every = graph.nodes()
        return every[page * size : (page + 1) * size], len(every)


def _made(record: CompactionRecord, layer: str) -> bool:
    """Whether ``record`` is the one that made ``layer``."""
    facts = record.facts
    return isinstance(facts, LayerFacts) and facts.layer == layer
