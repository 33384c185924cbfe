"""``Session``: one agent conversation in a store, with its context engine and its model.

A session opens (or creates) a session of the graph store — SQLite by default, PostgreSQL
by URL, ``":memory:"`` for nothing on disk — renders every LLM call through one
``ContextEngine``, and runs agentic code bound to it (``with session:``). Reopening a
session after a crash marks the functions whose process is gone as ``interrupted``.

A session owns its configuration (``_config``): the policy, budget, model name, redaction
and ``llm()`` defaults are stored when it is created, and a reopening uses them as stored.
``OPENPROGRAM_*`` variables and litellm's model map count only when a configuration is made
(at creation, or by :meth:`Session.configure`). Every prompt sent leaves a render receipt,
so a second process, the CLI and the notebooks see what the agent sent.

Binding running code (``_binding``), render receipts (``_receipts``), opening a store
(``_stores``) and the notebook table (``_overview``) are modules of their own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any, Self

from context import (
    ContextEngine,
    ContextStorage,
    Policy,
    Rendered,
    RenderReceipt,
    Summarizer,
    delete_session,
    release_state_folder,
    scrub_session,
    state_folder,
)
from graph import (
    TOP,
    ConversationGraph,
    Frame,
    MemoryStore,
    Redactor,
    ScrubReport,
    SessionInfo,
    Store,
    ToolSchema,
    is_safe_id,
    new_id,
    open_store,
    redactor_from,
)
from openprogram._errors import SessionError
from openprogram._runtime._binding import Binding
from openprogram._runtime._config import (
    RENDERING,
    known_model,
    load_config,
    model_name,
    record_change,
    session_config,
    with_fields,
)
from openprogram._runtime._current import SESSION, current_frame, current_host
from openprogram._runtime._history import HistoryTools
from openprogram._runtime._leases import DEFAULT_TTL, LeaseKeeper, mark_interrupted
from openprogram._runtime._loop import Call
from openprogram._runtime._models import Model, resolve_model
from openprogram._runtime._overview import session_html
from openprogram._runtime._receipts import Receipts
from openprogram._runtime._stores import migrate_old_files
from openprogram._runtime._tools import ToolSpec
from openprogram._runtime._usage import usage_of


class Session:
    """An agent's conversation, stored, rendered under a budget, bound to running code.

    Args:
        db: where the conversation is stored: a SQLite path, a PostgreSQL URL,
            ``":memory:"`` or a ``graph.Store`` (``None``: ``$OPENPROGRAM_DB`` or
            ``.openprogram/openprogram.db``).
        session_id: the session to continue (default: a new one).
        model: the model ``llm()`` calls use: a litellm model name or a ``Model`` (such as
            ``openprogram.testing.TestModel``).
        policy: the compaction cascade (default: the claude-code preset for ``model``).
        summarizer: what writes collapse and compaction summaries (default: heuristic,
            offline).
        system: a system prompt, appended once when the session has none.
        budget: the prompt's token budget (default: the policy's, from the model's window).
        state_dir: where offloaded outputs and record logs are written.
        history_tools: give the model the tools that read what compaction put away.
        max_steps: model turns one ``llm()`` call may take before it gives up.
        lease_ttl: seconds a running function's lease lasts without a heartbeat.
        redact: redact secrets before they are stored (``True`` or a ``Redactor``).

    Attributes:
        graph: the stored conversation, a ``graph.ConversationGraph`` (nodes, layers,
            ``to_openai()``, ``to_networkx()``).
        engine: the ``context.ContextEngine`` that renders each prompt; ``engine.preview()``
            shows the next one, ``engine.layers()``, ``engine.rollback(id)``,
            ``engine.expand(id)`` and ``engine.records()`` show and undo what it did.
        history: the history tools the model gets, callable from Python too.
        model, policy: what was chosen above; ``id`` and ``store`` name the session.

    >>> from openprogram.testing import TestModel
    >>> with Session(":memory:", model=TestModel(["Paris."]), system="Be brief.") as s:
    ...     s.llm("Capital of France?")
    'Paris.'

    It holds its parts as objects and delegates to them: binding running code
    (``_binding``) and render receipts (``_receipts``).
    """

    def __init__(
        self,
        db: str | os.PathLike[str] | Store | None = None,
        session_id: str | None = None,
        *,
        model: Model | str | None = None,
        policy: Policy | None = None,
        summarizer: Summarizer | None = None,
        system: str | None = None,
        budget: int | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        history_tools: bool | None = None,
        max_steps: int | None = None,
        lease_ttl: float = DEFAULT_TTL,
        redact: bool | Redactor | Mapping[str, Any] | None = None,
    ) -> None:
        """Open session ``session_id`` of ``db`` (a new one when it is None or not there).

        A new session stores ``policy`` (default: the claude-code preset for ``model``,
        read from the environment and litellm's model map now), ``budget``, the model's
        name, ``redact`` (True, or a ``Redactor``), ``max_steps`` and ``history_tools``.
        Reopening uses what is stored; an argument given that differs from it is an
        explicit change, applied and recorded as by :meth:`configure`. ``state_dir`` names
        the state folder instead of the database's own (see ``context.state_folder``).
        """
        if session_id is not None and not is_safe_id(session_id):
            raise SessionError(f"session id {session_id!r} is not a safe id ([A-Za-z0-9_.-])")
        store = open_store(db)
        self._owns_store = not isinstance(db, Store)
        name = session_id or new_id()
        stored = load_config(store, name) if session_id is not None else None
        chosen = stored.make_redactor() if redact is None and stored else redactor_from(redact)
        self.graph = ConversationGraph(store, name, redactor=chosen)
        if model is None and stored is not None and stored.model_by_name and stored.model:
            model = stored.model
        self.model = resolve_model(model)
        self.folder = state_folder(store, state_dir)
        """The database's state folder (offloaded outputs, records logs)."""
        named = model_name(model)
        if stored and policy is None and named != stored.model and named and known_model(named):
            policy = with_fields(stored.make_policy(), {"model": named})  # as configure()
        wanted = session_config(stored, model, policy, budget, redact, max_steps, history_tools)
        self.config = wanted
        """The configuration this session runs with (as stored)."""
        self._storage = ContextStorage(store, name, self.folder)
        self._binding = Binding(self, SESSION)
        self._receipts = Receipts(self._storage, name, lambda: self.graph.last_seq)
        if wanted != stored:
            record_change(store, name, self.folder, stored, wanted)
        if stored is not None or session_id is not None:
            migrate_old_files(store, self.folder, name)
        self.summarizer = summarizer
        self._configuring = threading.Lock()
        self.engine = self._engine()
        self.history = HistoryTools(self)
        self.leases = LeaseKeeper(store, self.graph.session, lease_ttl)
        self.interrupted = mark_interrupted(self.graph, self.leases)
        """Functions this reopening found running with no live owner, now ``interrupted``."""
        if system is not None and not any(n.role == "system" for n in self.graph.nodes()):
            self.graph.append({"role": "system", "content": system}, frame=TOP)

    def _engine(
        self, tools: Sequence[ToolSchema] | None = None, summarizer: Summarizer | None = None
    ) -> ContextEngine:
        """An engine as configured; ``summarizer``: the one the engine it replaces ran with,
        kept unless the session names its own (one set on ``session.engine`` survives a
        change)."""
        config = self.config
        engine = ContextEngine(
            self.graph,
            config.make_policy(),
            self.summarizer if self.summarizer is not None else summarizer,
            config.budget,
            state_dir=self.folder,
        )
        # A render's layers and tier state land only while this process holds its leases.
        engine.fences.append(lambda: self.leases.check(self.leases.mine()))
        engine.commit_hooks.append(partial(self._receipts.write, engine))  # in its transaction
        if tools is None:  # a reopening renders with the tools of the last prompt sent
            tools = engine.storage.last_tools() if engine.storage is not None else ()
        engine.set_tools(tools)
        return engine

    @property
    def policy(self) -> Policy:
        return self.engine.policy

    @property
    def max_steps(self) -> int:
        return self.config.max_steps

    @property
    def history_tools(self) -> bool:
        return self.config.history_tools

    def configure(
        self,
        *,
        policy: Policy | None = None,
        budget: int | None = None,
        model: Model | str | None = None,
        redact: bool | Redactor | Mapping[str, Any] | None = None,
        max_steps: int | None = None,
        history_tools: bool | None = None,
        **settings: Any,
    ) -> dict[str, Any]:
        """Change how this session runs, explicitly: the change is stored (every later
        reopening, the CLI and other processes use it), recorded as a configuration event,
        and starts a new epoch of tier state (sticky decisions made under the old settings
        are not re-applied). ``settings`` change single policy fields (``low_water=0.6``);
        a new ``model=`` name also re-reads its window from the model map. Returns what
        changed (empty: nothing did)."""
        base = policy or self.config.make_policy()
        name = model_name(model)
        if policy is None and name and "model" not in settings and known_model(name):
            settings = {**settings, "model": name}
        if settings:
            base = with_fields(base, settings)
        resolved = resolve_model(model) if model is not None else self.model
        wanted = session_config(
            self.config, model, base, budget, redact, max_steps, history_tools, explicit=True
        )
        found = record_change(self.store, self.id, self.folder, self.config, wanted)
        self.model = resolved  # only once the change is stored (a refused one changes nothing)
        if not found:
            return {}
        if redact is not None:
            self.graph.redactor = wanted.make_redactor()
        self.config = wanted
        if RENDERING & set(found):  # a new model name alone leaves the engine as it is
            old = self.engine
            self.engine = self._engine(old.tools, old.summarizer)
            old.close()
        return found

    def _follow_config(self) -> None:
        """Adopt a configuration stored since this session read it (``openprogram
        configure`` or another process's ``configure``): every call runs as stored."""
        stored = load_config(self.store, self.id)
        if stored is None or stored == self.config:
            return
        with self._configuring:
            if stored == self.config:
                return
            if stored.redact != self.config.redact or stored.redact_patterns != (
                self.config.redact_patterns
            ):
                self.graph.redactor = stored.make_redactor()
            self.config = stored
            old = self.engine
            self.engine = self._engine(old.tools)
            old.close()

    # -- identity -------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return self.graph.session

    @property
    def store(self) -> Store:
        return self.graph.store

    def __repr__(self) -> str:
        return f"Session({self.id!r}, {self.store.url!r}, {len(self.graph)} nodes)"

    def _repr_html_(self) -> str:
        return session_html(self)

    @classmethod
    def list(cls, db: str | os.PathLike[str] | Store | None = None) -> list[SessionInfo]:
        """The sessions of a store, oldest first."""
        return open_store(db).sessions()

    # -- binding running code (``_binding``) ----------------------------------------------
    def __enter__(self) -> Self:
        self._binding.enter()
        return self

    def __exit__(self, *exc: object) -> None:
        self._binding.exit()

    @contextmanager
    def bound(self) -> Iterator[Self]:
        """``with session.bound():`` — the same as ``with session:``."""
        with self:
            yield self

    def run(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn`` (sync or async) with this session bound; return its result. An async
        one runs to completion here — on a worker thread when this thread already runs an
        event loop (a notebook), so it works the same everywhere."""
        return self._binding.run(fn, *args, **kwargs)

    # -- render receipts (``_receipts``) ---------------------------------------------------
    def receipt(self) -> RenderReceipt | None:
        """The last prompt this session sent, as a receipt (None: none sent yet)."""
        return self._receipts.last()

    def last_prompt(self) -> Rendered | None:
        """The prompt this session sent last, exactly as sent (a :class:`~context.SentPrompt`
        read back from its receipt's stored messages); for a receipt written before
        messages were kept, rendered again from it (its head, frame, tools and effective
        budget), writing nothing. None before the first call. ``session.engine.preview()``
        shows the next one."""
        return self._receipts.last_prompt(self.engine)

    # -- LLM calls ------------------------------------------------------------------------
    def _call(
        self,
        prompt: str | None,
        tools: Sequence[ToolSpec | Callable[..., Any]],
        output_type: Any,
        model: Model | str | None,
        max_steps: int | None,
        frame: Frame | None,
    ) -> Call:
        self._follow_config()
        where = frame if frame is not None else (current_frame() if SESSION.get() is self else TOP)
        call = Call(  # first: a call that cannot run (no model, a bad tool) records nothing
            self,
            where,
            tools=tools,
            output_type=output_type,
            model=resolve_model(model),
            max_steps=max_steps or self.max_steps,
            history_tools=self.history_tools,
        )
        if where.function is not None:  # fenced: never write into work another process took
            self.leases.check([where.function, *self.graph.state.ancestry(where.function)])
        if prompt is not None:
            self.graph.append({"role": "user", "content": prompt}, frame=where)
        return call

    def llm(
        self,
        prompt: str | None = None,
        *,
        tools: Sequence[ToolSpec | Callable[..., Any]] = (),
        output_type: Any = str,
        model: Model | str | None = None,
        max_steps: int | None = None,
        frame: Frame | None = None,
    ) -> Any:
        """Ask the model (in the current frame): ``prompt`` becomes a user message, tools
        are run as the model calls them, and the answer comes back as ``output_type``."""
        return self._call(prompt, tools, output_type, model, max_steps, frame).run()

    async def allm(
        self,
        prompt: str | None = None,
        *,
        tools: Sequence[ToolSpec | Callable[..., Any]] = (),
        output_type: Any = str,
        model: Model | str | None = None,
        max_steps: int | None = None,
        frame: Frame | None = None,
    ) -> Any:
        """:meth:`llm` for async code (async tools run concurrently)."""
        return await self._call(prompt, tools, output_type, model, max_steps, frame).arun()

    # -- branches, copies, deletion -------------------------------------------------------
    def fork(self, node_id: str) -> Session:
        """A session object on the same session, positioned on a new branch at ``node_id``."""
        other = Session(
            self.store,
            self.id,
            model=self.model,
            summarizer=self.engine.summarizer,
            state_dir=self.folder.path,
            lease_ttl=self.leases.ttl,
            redact=self.graph.redactor or False,
        )
        other.graph.fork(node_id)
        return other

    def copy(
        self,
        to_db: str | os.PathLike[str] | Store | None = None,
        *,
        session_id: str | None = None,
        head: str | None = None,
    ) -> Session:
        """This session (or the branch ending at ``head``) as a new session, in this store or
        another (e.g. from the SQLite file to PostgreSQL). Nodes get new ids, so a copy can
        live beside its original; context decisions start afresh."""
        target = open_store(to_db) if to_db is not None else self.store
        name = session_id or new_id()
        if target.has_session(name):
            raise SessionError(f"session {name!r} already exists in {target.url}")
        self.graph.copy_to(target, name, head=head)
        config = self.config
        return Session(
            target,
            name,
            model=self.model,
            policy=self.policy,
            summarizer=self.engine.summarizer,
            budget=config.budget,
            history_tools=config.history_tools,
            max_steps=config.max_steps,
            redact=self.graph.redactor or False,
            state_dir=self.folder.path if target is self.store else None,
            lease_ttl=self.leases.ttl,
        )

    def delete(self) -> None:
        """Delete this session: its nodes, layers, records, tier state, offload files and
        records log — and nothing of any other session."""
        self.engine.close()
        self.leases.close()
        delete_session(self.store, self.id, self.folder.path)

    def scrub(
        self, patterns: str | Sequence[str] | Mapping[str, str] | Redactor, *, vacuum: bool = True
    ) -> ScrubReport:
        """Remove already stored secrets: rewrite what ``patterns`` match (a regex, several,
        ``{label: regex}``, or a :class:`~graph.Redactor` such as ``Redactor()`` for every
        known key format) in this session's rows and offload files, physically (the
        database is vacuumed), and leave an audit entry naming labels and counts, never
        the secret. This session object then reads the scrubbed session afresh, and so do
        the ones other processes have open, before their next render (they keep their
        leases). The report's ``residues`` say where the old text may remain out of reach
        (a write-ahead log, backups, exports, prompts sent). A state folder file it must
        not rewrite (a hardlink, a FIFO) is left as it was and named by
        :class:`~context.ScrubRefused`, raised after everything else is scrubbed."""
        chosen = scrub_patterns(patterns)
        self.engine.close()
        try:
            return scrub_session(self.store, self.id, chosen, self.folder.path, vacuum=vacuum)
        finally:
            tools = self.engine.tools
            self.graph = ConversationGraph(self.store, self.id, redactor=self.graph.redactor)
            self.engine = self._engine(tools)
            self.history = HistoryTools(self)

    def close(self) -> None:
        """Stop background work (the summary worker, the lease heartbeat); an in-memory
        store this session opened takes its temporary state folder with it."""
        self.engine.close()
        self.leases.close()
        if self._owns_store and isinstance(self.store, MemoryStore):
            release_state_folder(self.store)

    # -- usage ----------------------------------------------------------------------------
    def usage(self) -> dict[str, Any]:
        """Tokens in and out, cached tokens and cost, in total, per model and per function
        (the innermost agentic function that made the call; ``(top)`` outside any)."""
        return usage_of(self.graph)


def current_session() -> Session:
    """The session the running code belongs to; :class:`NoSession` outside one."""
    host = current_host()
    if not isinstance(host, Session):  # only a Session binds itself
        raise SessionError(f"the running code belongs to {host!r}, not to a Session")
    return host


def scrub_patterns(
    patterns: str | Sequence[str] | Mapping[str, str] | Redactor,
) -> Mapping[str, str] | Redactor:
    """``{label: regex}`` from what :meth:`Session.scrub` takes (plain regexes are labelled
    ``pattern-1``, ``pattern-2``…: the audit names labels, never the pattern)."""
    if isinstance(patterns, Redactor | Mapping):
        return patterns
    if isinstance(patterns, str):
        patterns = [patterns]
    return {f"pattern-{i}": pattern for i, pattern in enumerate(patterns, 1)}
