"""Deleting a session removes everything we keep for it, not just its nodes."""

from __future__ import annotations

from pathlib import Path

from graph import Store, is_safe_id

from ._errors import ContextError
from ._files import remove_tree
from ._folder import state_folder
from ._records import records_path


def delete_session(store: Store, session: str, state_dir: Path | None = None) -> None:
    """Delete a session's nodes, layers, compaction records, tier state, cached token counts
    (all in the store) and its offload files and records log (in the database's own state
    folder, or ``state_dir``, which must not serve another database).

    >>> from graph import MemoryStore
    >>> store = MemoryStore(); _ = store.ensure_session("s1")
    >>> delete_session(store, "s1"); [s.id for s in store.sessions()]
    []
    """
    if not is_safe_id(session):
        raise ContextError(f"session id {session!r} is not a safe id")
    state_dir = state_folder(store, state_dir).path  # refuses another database's folder
    store.delete_session(session)
    remove_tree(state_dir, ["tool_results", session])
    path = records_path(state_dir, session)
    if path.is_symlink() or path.exists():
        path.unlink()
