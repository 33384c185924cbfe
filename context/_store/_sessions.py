"""Deleting a session removes everything we keep for it, not just its nodes; collecting
garbage removes the state folder's files that no session (or node) owns.

Both remove by walking from the state folder with descriptors (``_removal``): a link is
never followed at any step, and what is left in place is said, naming the path.
"""

from __future__ import annotations

import os
import stat
import time
import warnings
from pathlib import Path

from graph import ConversationGraph, Store, is_safe_id

from .._errors import ContextError
from ._files import DIR_FLAGS
from ._folder import state_folder
from ._removal import Removal, opened_folder, remove_entry, remove_under

TMP_GRACE_SECONDS = 600
"""A temporary file younger than this may be a write in progress elsewhere: gc keeps it."""


def delete_session(store: Store, session: str, state_dir: Path | None = None) -> Removal:
    """Delete a session's nodes, layers, compaction records, tier state, cached token counts
    (all in the store) and its offload files and records log (in the database's own state
    folder, or ``state_dir``, which must not serve another database).

    Returns what was removed from the state folder and what was refused (a link where a
    folder belongs is never followed), each refusal also warned as a ``RuntimeWarning``.

    >>> from graph import MemoryStore
    >>> store = MemoryStore(); _ = store.ensure_session("s1")
    >>> _ = delete_session(store, "s1"); [s.id for s in store.sessions()]
    []
    """
    if not is_safe_id(session):
        raise ContextError(f"session id {session!r} is not a safe id")
    folder = state_folder(store, state_dir)  # refuses another database's folder, or a copy
    folder.settle()
    state_dir = folder.path
    store.delete_session(session)
    report = remove_under(state_dir, ["tool_results"], session)
    report.extend(remove_under(state_dir, ["records"], f"{session}.jsonl"))
    for refusal in report.refused:
        warnings.warn(f"deleting session {session!r}: {refusal}", RuntimeWarning, stacklevel=2)
    return report


def collect_garbage(
    store: Store, state_dir: Path | None = None, *, dry_run: bool = False
) -> Removal:
    """Remove offload files and record logs whose session (or node) no longer exists,
    links and anything else that is not ours, and temporary files older than
    ``TMP_GRACE_SECONDS``. ``dry_run`` removes nothing and lists exactly what a real run
    would remove, in the same order."""
    folder = state_folder(store, state_dir)  # refuses another database's folder, or a copy
    if not dry_run:
        folder.settle()
    state_dir = folder.path
    sessions = {info.id for info in store.sessions()}
    report = Removal()
    results_dir = Path(state_dir, "tool_results")
    with opened_folder(state_dir, ["tool_results"], report) as opened:
        if opened is not None:
            results, device = opened
            for name in sorted(os.listdir(results)):
                where = results_dir / name
                if name not in sessions or not is_safe_id(name):
                    remove_entry(results, name, where, report, device=device, dry_run=dry_run)
                    continue
                _collect_session(store, name, results, where, report, device, dry_run)
    with opened_folder(state_dir, ["records"], report) as opened:
        if opened is not None:
            logs, device = opened
            for name in sorted(os.listdir(logs)):
                if name.startswith(".") or not name.endswith(".jsonl"):
                    continue
                if name.removesuffix(".jsonl") not in sessions:
                    where = Path(state_dir, "records", name)
                    remove_entry(logs, name, where, report, device=device, dry_run=dry_run)
    return report


def _collect_session(
    store: Store, session: str, parent: int, where: Path, report: Removal, device: int, dry: bool
) -> None:
    """A live session's folder: keep its nodes' files and young temporary files."""
    try:
        folder = os.open(session, DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        return
    except OSError:  # a link or a file where the session's folder belongs: the name goes
        remove_entry(parent, session, where, report, device=device, dry_run=dry)
        return
    try:
        if os.fstat(folder).st_dev != device:
            report.refused.append(f"{where} is a mount point; not descended into")
            return
        nodes = ConversationGraph(store, session)
        now = time.time()
        for name in sorted(os.listdir(folder)):
            try:
                info = os.stat(name, dir_fd=folder, follow_symlinks=False)
            except FileNotFoundError:
                continue
            regular = stat.S_ISREG(info.st_mode)
            if regular and name.endswith(".txt") and name.removesuffix(".txt") in nodes:
                continue
            if regular and name.endswith(".tmp") and now - info.st_mtime < TMP_GRACE_SECONDS:
                continue  # a write in progress elsewhere; a killed one's is old
            remove_entry(folder, name, where / name, report, device=device, dry_run=dry)
    finally:
        os.close(folder)
