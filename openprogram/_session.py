"""``Session``: one agent conversation in a store, with its context engine and its model.

A session opens (or creates) a session of the graph store — SQLite by default, PostgreSQL
by URL, ``":memory:"`` for nothing on disk — renders every LLM call through one
``ContextEngine``, and runs agentic code bound to it (``with session:``). Reopening a
session after a crash marks the functions whose process is gone as ``interrupted``.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from context import (
    ContextEngine,
    Policy,
    PolicyError,
    Summarizer,
    UnknownModel,
    delete_session,
    model_info,
)
from graph import (
    TOP,
    ConversationGraph,
    Frame,
    MemoryStore,
    Redactor,
    SessionInfo,
    SQLStore,
    Store,
    is_safe_id,
    new_id,
)
from openprogram._current import FRAME, SESSION, current_frame
from openprogram._errors import SessionError
from openprogram._history import HistoryTools
from openprogram._leases import DEFAULT_TTL, LeaseKeeper, mark_interrupted
from openprogram._loop import Call
from openprogram._models import Model, resolve_model
from openprogram._tools import ToolSpec

MEMORY = ":memory:"
DEFAULT_STEPS = 25

_ENTERED: ContextVar[tuple[tuple[Session, Session | None, Frame], ...]] = ContextVar(
    "openprogram_entered", default=()
)
"""``with session:`` blocks open in this thread or task: (session, the session and frame
bound before it). Kept per context, so blocks in concurrent tasks and threads never undo
each other's bindings."""


def open_store(db: str | os.PathLike[str] | Store | None) -> Store:
    """A store from a path or URL (``None``: ``$OPENPROGRAM_DB`` or the default file)."""
    if isinstance(db, Store):
        return db
    if db == MEMORY:
        return MemoryStore()
    return SQLStore(db)


def policy_for(model: Model | str | None, state_dir: Path | None) -> Policy:
    """The claude-code preset for a model the map knows, by name or by a model object's
    ``name`` (the 128k default otherwise)."""
    extra: dict[str, Any] = {} if state_dir is None else {"state_dir": state_dir}
    name = model if isinstance(model, str) else getattr(model, "name", None)
    if name:
        try:
            model_info(name)
        except UnknownModel:
            name = None
    try:
        return Policy.claude_code(name, **extra)
    except PolicyError:
        return Policy.claude_code(None, **extra)


class Session:
    """An agent's conversation, stored, rendered under a budget, bound to running code.

    >>> from openprogram.testing import TestModel
    >>> with Session(":memory:", model=TestModel(["Paris."]), system="Be brief.") as s:
    ...     s.llm("Capital of France?")
    'Paris.'
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
        history_tools: bool = True,
        max_steps: int = DEFAULT_STEPS,
        lease_ttl: float = DEFAULT_TTL,
        redact: bool | Redactor = False,
    ) -> None:
        if session_id is not None and not is_safe_id(session_id):
            raise SessionError(f"session id {session_id!r} is not a safe id ([A-Za-z0-9_.-])")
        store = open_store(db)
        redactor = Redactor() if redact is True else (redact or None)
        self.graph = ConversationGraph(store, session_id or new_id(), redactor=redactor)
        self.model = resolve_model(model)
        folder = Path(state_dir) if state_dir is not None else None
        self.policy = policy or policy_for(model, folder)
        self.engine = ContextEngine(self.graph, self.policy, summarizer, budget)
        self.history = HistoryTools(self)
        self.history_tools = history_tools
        self.max_steps = max_steps
        self.leases = LeaseKeeper(store, self.graph.session, lease_ttl)
        self.interrupted = mark_interrupted(self.graph, self.leases)
        """Functions this reopening found running with no live owner, now ``interrupted``."""
        if system is not None and not any(n.role == "system" for n in self.graph.nodes()):
            self.graph.append({"role": "system", "content": system}, frame=TOP)

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
        from graph import html_table

        nodes = self.graph.nodes()
        functions = [n for n in nodes if n.kind == "function"]
        states = ", ".join(
            f"{sum(1 for f in functions if f.status == s)} {s}"
            for s in ("running", "completed", "error", "interrupted")
            if any(f.status == s for f in functions)
        )
        layers = self.graph.layers()
        total = self.usage()["total"]
        return html_table(
            f"session {self.id}",
            [
                ("store", self.store.url),
                ("nodes", f"{len(nodes)} ({len(functions)} functions: {states or 'none'})"),
                ("layers", f"{sum(1 for x in layers if x.active)} active of {len(layers)}"),
                ("model", getattr(self.model, "name", None)),
                ("policy", f"{self.policy.name}, budget {self.engine.budget:,}"),
                (
                    "usage",
                    f"{total['calls']} calls, {total['input_tokens']:,} in, "
                    f"{total['output_tokens']:,} out",
                ),
            ],
        )

    @classmethod
    def list(cls, db: str | os.PathLike[str] | Store | None = None) -> list[SessionInfo]:
        """The sessions of a store, oldest first."""
        return open_store(db).sessions()

    # -- binding running code ------------------------------------------------------------
    def __enter__(self) -> Session:
        _ENTERED.set((*_ENTERED.get(), (self, SESSION.get(), FRAME.get())))
        SESSION.set(self)
        FRAME.set(TOP)
        return self

    def __exit__(self, *exc: object) -> None:
        entered = _ENTERED.get()
        if not entered or entered[-1][0] is not self:
            raise SessionError(f"{self!r} is not the session this code entered last")
        _, session, frame = entered[-1]
        _ENTERED.set(entered[:-1])
        SESSION.set(session)
        FRAME.set(frame)

    @contextmanager
    def bound(self) -> Iterator[Session]:
        """``with session.bound():`` — the same as ``with session:``."""
        with self:
            yield self

    def run(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn`` (sync or async) with this session bound; return its result. An async
        one runs to completion here — on a worker thread when this thread already runs an
        event loop (a notebook), so it works the same everywhere."""
        with self:
            result = fn(*args, **kwargs)
            if not inspect.isawaitable(result):
                return result
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return asyncio.run(_await(result))
            context = contextvars.copy_context()
            with ThreadPoolExecutor(1, thread_name_prefix="openprogram-run") as pool:
                return pool.submit(context.run, asyncio.run, _await(result)).result()

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
            policy=self.policy,
            summarizer=self.engine.summarizer,
            budget=self.engine.budget,
            history_tools=self.history_tools,
            max_steps=self.max_steps,
            lease_ttl=self.leases.ttl,
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
        return Session(
            target,
            name,
            model=self.model,
            policy=self.policy,
            summarizer=self.engine.summarizer,
            budget=self.engine.budget,
            history_tools=self.history_tools,
            max_steps=self.max_steps,
            lease_ttl=self.leases.ttl,
        )

    def delete(self) -> None:
        """Delete this session: its nodes, layers, records, tier state, offload files and
        records log — and nothing of any other session."""
        self.engine.close()
        self.leases.close()
        delete_session(self.store, self.id, self.policy.state_dir)

    def close(self) -> None:
        """Stop background work (the summary worker, the lease heartbeat)."""
        self.engine.close()
        self.leases.close()

    # -- usage ----------------------------------------------------------------------------
    def usage(self) -> dict[str, Any]:
        """Tokens in and out, cached tokens and cost, in total, per model and per function
        (the innermost agentic function that made the call; ``(top)`` outside any)."""
        total = _Totals()
        models: dict[str, _Totals] = {}
        functions: dict[str, _Totals] = {}
        state = self.graph.state
        for node in self.graph.nodes():
            usage = node.meta.get("usage") if node.role == "assistant" else None
            if not isinstance(usage, dict):
                continue
            caller = state.caller.get(node.id)
            function = str(state.nodes[caller].payload.name) if caller else "(top)"
            model = str(node.meta.get("model") or "?")
            for bucket in (total, models.setdefault(model, _Totals())):
                bucket.add(usage)
            functions.setdefault(function, _Totals()).add(usage)
        return {
            "total": total.as_dict(),
            "models": {k: v.as_dict() for k, v in models.items()},
            "functions": {k: v.as_dict() for k, v in functions.items()},
        }


class _Totals:
    def __init__(self) -> None:
        self.calls = 0
        self.input = 0
        self.cached = 0
        self.output = 0
        self.cost: float | None = 0.0

    def add(self, usage: dict[str, Any]) -> None:
        self.calls += 1
        read = int(usage.get("cache_read") or 0)
        self.input += int(usage.get("input") or 0) + read + int(usage.get("cache_creation") or 0)
        self.cached += read
        self.output += int(usage.get("output") or 0)
        cost = usage.get("cost")
        self.cost = None if cost is None or self.cost is None else self.cost + float(cost)

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "input_tokens": self.input,
            "cached_tokens": self.cached,
            "output_tokens": self.output,
            "cost": None if self.cost is None else round(self.cost, 6),
        }


async def _await(value: Any) -> Any:
    return await value
