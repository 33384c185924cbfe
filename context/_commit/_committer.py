"""``Committer``: the only writer of what a render or a layer operation decided.

A commit writes, in this order (see ``_writer`` for why): the offload files, then in one
transaction the layers, tier state, token counts, records and the commit hooks' writes
(the render receipt), then the records' JSONL log. The token counts it stores are those
the decision counted anew (the cache's dirty set).
"""

from __future__ import annotations

import msgspec

from graph import GraphError, GraphReader, LayerError

from .._budget._anchor import UsageAnchor
from .._budget._policy import Policy
from .._budget._redaction import clean_records
from .._budget._tokens import TokenCache
from .._errors import OffloadError
from .._render._decision import Decision
from .._render._frame import FrameStore
from .._render._rendered import Rendered
from .._store._files import write_text_once
from .._store._folder import StateFolder
from .._store._records import CompactionRecord
from .._store._storage import ContextStorage
from .._tiers._book import LayerBook
from ._hooks import Committed, Hooks
from ._writer import Redo, SessionWriter


class Committer:
    """Writes decisions through a session writer (in memory when there is none)."""

    def __init__(
        self,
        graph: GraphReader,
        policy: Policy,
        writer: SessionWriter | None,
        storage: ContextStorage | None,
        folder: StateFolder,
        book: LayerBook,
        frames: FrameStore,
        cache: TokenCache,
        encoding: str,
        hooks: Hooks,
    ) -> None:
        self.graph = graph
        self.policy = policy
        self.writer = writer
        self.storage = storage
        self.folder = folder
        self.book = book
        self.frames = frames
        self.cache = cache
        self.encoding = encoding
        self.hooks = hooks
        self.kept: list[CompactionRecord] = []
        """Records of a session with no storage (a memory graph, a reader)."""
        self.owed: list[str] = []
        """What went wrong copying records to the log before: said with the next commit."""
        if storage is not None and writer is not None:
            self.owed.extend(storage.catch_up_log())

    def commit(self, decision: Decision, rendered: Rendered | None = None) -> list[str]:
        """Write what ``decision`` decided: files, then one transaction, then the log.

        Raises :class:`Redo` when the transaction refused it (a conflict with another
        writer, checked under the session's lock) or a file could not be written; a
        database that is down fails open (the decisions are kept and written with the
        next commit). Returns what went wrong in words (empty when all is well)."""
        ctx, frame = decision.ctx, decision.frame
        ctx.records[:] = clean_records(ctx.records, self.policy, self.graph)
        records = list(ctx.records)
        writer, storage = self.writer, self.storage
        if writer is None or storage is None:
            self.kept.extend(records)
            self.hooks.notify(records)
            return []
        self._write_files(decision)
        layers = decision.layers
        state = self.frames.encode(frame)
        dirty = self.cache.dirty()
        seq = self.graph.last_seq
        try:
            with writer.batch():
                writer.lock()
                self.hooks.fence()
                for info in layers:
                    writer.add_layer(
                        info.kind,
                        info.covers,
                        info.layer.replacement,
                        meta=info.layer.meta,
                        layer_id=info.id,
                    )
                if state != frame.saved:
                    storage.save_state(self.frames.key(decision.key), state.decode())
                if dirty:
                    storage.save_tokens(self.encoding, dirty)
                storage.write_records(records, self.graph.last_seq)
                if rendered is not None:
                    self.hooks.committed(Committed(decision.request, rendered, decision.sources))
        except LayerError as conflict:
            raise Redo(str(conflict)) from conflict
        except GraphError as error:  # fail-open: the prompt matters more than the cache
            storage.owe(records, seq)
            self.hooks.notify(records)
            return [f"decisions not stored, kept for the next commit: {error}"]
        storage.written()
        frame.saved = state
        self.cache.clear_dirty()
        self.book.settle(info.id for info in layers)
        problems = [*self.owed, *storage.log_records(records)]
        self.owed.clear()
        self.hooks.notify(records)
        return problems

    def _write_files(self, decision: Decision) -> None:
        """Step one of a commit: the offload files, each named by its node (idempotent)."""
        failed: list[str] = []
        problems: list[str] = []
        for file in decision.ctx.files:
            try:
                write_text_once(self.folder.claim(), file.parts, file.name, file.text)
            except (OSError, OffloadError) as error:
                failed.append(file.node_id)
                problems.append(f"node {file.node_id}: {error}")
        if failed:
            raise Redo("offload files not written", tuple(failed), tuple(problems))

    def save_anchor(self, anchor: UsageAnchor) -> None:
        if self.storage is not None and self.writer is not None:
            value = msgspec.json.encode(anchor.state()).decode()
            self.storage.save_state(f"{self.frames.state_key}:anchor", value)

    def log(self, record: CompactionRecord) -> None:
        """Persist a record made outside a render (a recovery)."""
        [record] = clean_records([record], self.policy, self.graph)
        if self.storage is None or self.writer is None:
            self.kept.append(record)
        else:
            self.storage.save_records([record], self.graph.last_seq)
        self.hooks.notify([record])

    def records(self) -> list[CompactionRecord]:
        """This session's compaction records, oldest first (from the database if any)."""
        if self.storage is None:
            return list(self.kept)
        return [*self.storage.read_records(), *self.kept]
