"""Moving files out of an old shared state folder into the database's own one.

Before state folders belonged to databases, every database used from a working folder
wrote into one ``./.openprogram``. :func:`migrate_state` copies (never moves) what belongs
to this database into its own folder: an offloaded output when its node id is a node of
this database's session, a records-log line when its record id is one of this database's
records. What belongs to another database stays where it is, untouched. A file is named by
what it should hold, not proof of it: an output is copied only when its bytes are the
node's output as the store keeps it, a record line only when it is the stored record, and
anything else named for one of ours (a stand-in planted in a shared folder, a stale or
redacted copy) is skipped and said; the next render writes an output from the store. It
runs from ``openprogram migrate-state`` and when a ``Session`` opens a session for writing
(never on a read-only open).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from graph import (
    ConversationGraph,
    Dialogue,
    Node,
    Store,
    function_messages,
    is_safe_id,
    text_of,
    tool_result_message,
)

from ._files import append_lines, write_text_once
from ._folder import StateFolder
from ._records import CompactionRecord, decode_record
from ._storage import RECORDS

OLD_FOLDER = Path(".openprogram")
"""Where every database used to keep its files (relative to the working folder)."""


@dataclass
class StateMigration:
    """What :func:`migrate_state` did."""

    copied: list[Path] = field(default_factory=list)
    """The files written (an output, or a records log appended to)."""
    skipped: list[str] = field(default_factory=list)
    """One line each: a file or record named for one of ours that is not what the store
    holds, left where it was."""


def migrate_state(
    store: Store,
    folder: StateFolder,
    old: Path = OLD_FOLDER,
    sessions: Iterable[str] | None = None,
) -> StateMigration:
    """Copy this database's files (of ``sessions``, or of all its sessions) from ``old``
    into ``folder``, each only when it holds what the store does. Files already copied are
    not copied again, so it can run again; nothing in ``old`` is changed."""
    report = StateMigration()
    if not old.is_dir() or old.is_symlink() or _same(old, folder.path):
        return report
    names = list(sessions) if sessions is not None else [s.id for s in store.sessions()]
    for session in names:
        if not is_safe_id(session):
            continue
        _outputs(store, folder, old / "tool_results" / session, session, report)
        _records(store, folder, old / "records" / f"{session}.jsonl", session, report)
    return report


def _same(old: Path, new: Path) -> bool:
    try:
        return old.resolve() == new.resolve()
    except OSError:
        return False


def _outputs(
    store: Store, folder: StateFolder, source: Path, session: str, report: StateMigration
) -> None:
    if source.is_symlink() or not source.is_dir():
        return
    graph: ConversationGraph | None = None
    for file in sorted(source.iterdir()):
        node = file.stem
        if file.suffix != ".txt" or not is_safe_id(node) or store.session_of(node) != session:
            continue  # not ours (another database's node), or not an output
        data = _read_regular(file)
        if data is None:
            report.skipped.append(f"{file}: not a regular file of one link")
            continue
        graph = graph or ConversationGraph(store, session)
        text = _stored_output(graph, node)
        if text is None or data != text.encode("utf-8", "surrogatepass"):
            report.skipped.append(
                f"{file}: not the stored output of node {node} (the next render writes "
                "it from the store)"
            )
            continue
        if write_text_once(folder.claim(), ["tool_results", session], file.name, text):
            report.copied.append(folder.path / "tool_results" / session / file.name)


def _stored_output(graph: ConversationGraph, node_id: str) -> str | None:
    """The text an offload file of ``node_id`` holds: the node's output message as a
    prompt carries it (None: a node with no output)."""
    if node_id not in graph:
        return None
    node: Node = graph.get(node_id)
    if node.kind == "tool":
        return text_of(tool_result_message(node)["content"])
    if node.kind == "function":
        return text_of(function_messages(node)[1]["content"])
    return text_of(node.payload.content) if isinstance(node.payload, Dialogue) else None


def _records(
    store: Store, folder: StateFolder, source: Path, session: str, report: StateMigration
) -> None:
    data = _read_regular(source)
    if data is None:
        return
    ours = {entry.key: entry.body for entry in store.read_log(session, RECORDS)}
    target = folder.path / "records" / source.name
    have = {_record_id(line) for line in (_read_regular(target) or b"").splitlines()}
    lines = []
    for line in data.splitlines():
        found = _record_id(line)
        if found is None or found not in ours or found in have:
            continue
        if _decoded(line) != _decoded(ours[found]):
            report.skipped.append(f"{source}: record {found} is not the stored record")
            continue
        lines.append(line)
        have.add(found)
    if lines:
        append_lines(folder.claim(), ["records"], source.name, lines)
        report.copied.append(target)


def _decoded(data: bytes | str) -> CompactionRecord | None:
    try:
        return decode_record(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _record_id(line: bytes) -> str | None:
    try:
        return decode_record(line).id
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _read_regular(path: Path) -> bytes | None:
    """A regular file's bytes, never through a symlink (None: missing, not a regular file,
    or one with a second name: a hardlink planted there is never copied in as ours)."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(handle, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            return None
        return file.read()
