"""Tier ``rereads``: outputs of file reads that a newer read or a write of the file supersedes.

When an agent reads a file again, the older read is near-lossless to drop: the newer one holds
the same lines, or newer ones. When it writes the whole file anew, the older read shows lines
that are no longer there. Such an output is replaced by a one-line note naming the file and
lines and pointing to the node (``read_output`` returns it), so nothing is lost for good.

A read is keyed on its arguments, not only its path: an agent reads a long file in windows
(Claude Code's ``Read`` with ``offset``/``limit``, ``sed -n 'a,bp'``, ``nl -ba f | sed -n``),
and one window supersedes another only if it covers all of its lines. :func:`read_target`
gives ``(path, first, last)`` with ``last`` None for "to the end"; :func:`write_target` the
path a call writes whole.

Like microcompact, the tier decides only when the prompt is over its trigger and re-applies
what it decided on every render, so between decisions the prompt prefix stays byte-stable.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Mapping
from typing import Any

import msgspec

from graph import ChatMessage

from .._view import Item, View, map_items
from ._tier import Tier, TierContext, TierState

ReadTarget = tuple[str, int, int | None]
"""A file path and the 1-based lines read, ``last`` None for the rest of the file."""

_READ_TOOLS = frozenset({"read", "fileread", "read_file", "view", "open", "cat", "notebookread"})
_WRITE_TOOLS = frozenset({"write", "filewrite", "create"})
_VIEWERS = frozenset({"str_replace_editor", "str_replace_based_edit_tool"})
_SHELL_TOOLS = frozenset({"bash", "shell", "exec_command", "execute", "run", "local_shell"})
_PATH_KEYS = ("file_path", "path", "filename", "notebook_path", "file")
_SED_RANGE = re.compile(r"^(\d+)(?:,(\d+|\$))?p$")
_SHELL_META = frozenset("|;&<>`$(){}*?[]")


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _path(arguments: Mapping[str, Any]) -> str | None:
    for key in _PATH_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _plain(word: str) -> bool:
    return bool(word) and not _SHELL_META.intersection(word)


def _shell_read(command: str) -> ReadTarget | None:
    """``cat f``, ``head -n N f``, ``sed -n 'a,bp' f`` and ``nl -ba f | sed -n 'a,bp'``."""
    try:
        words = shlex.split(command, comments=False)
    except ValueError:
        return None
    if "|" in words:
        if words.count("|") != 1 or command.count("|") != 1:
            return None
        bar = words.index("|")
        left, right = words[:bar], words[bar + 1 :]
        if len(left) != 3 or left[:2] != ["nl", "-ba"] or not _plain(left[2]):
            return None
        if len(right) != 3 or right[:2] != ["sed", "-n"]:
            return None
        return _sed_range(left[2], right[2])
    if any(not _plain(w) for w in words[1:] if not w.startswith("-") and "," not in w):
        return None
    if len(words) == 2 and words[0] == "cat" and not words[1].startswith("-"):
        return (words[1], 1, None)
    if len(words) == 4 and words[:2] == ["sed", "-n"] and _plain(words[3]):
        return _sed_range(words[3], words[2])
    if len(words) == 4 and words[0] == "head" and words[1] == "-n" and _plain(words[3]):
        lines = _int(words[2])
        return None if lines is None else (words[3], 1, lines)
    return None


def _sed_range(path: str, script: str) -> ReadTarget | None:
    match = _SED_RANGE.match(script)
    if match is None:
        return None
    first = int(match.group(1))
    end = match.group(2)
    if end is None:
        return (path, first, first)
    return (path, first, None if end == "$" else int(end))


def read_target(tool_name: str, arguments: Mapping[str, Any]) -> ReadTarget | None:
    """The file and lines a call reads, or None when it is not a plain file read.

    >>> read_target("Read", {"file_path": "a.py", "offset": 10, "limit": 5})
    ('a.py', 10, 14)
    >>> read_target("bash", {"command": "nl -ba a.py | sed -n '20,40p'"})
    ('a.py', 20, 40)
    """
    name = tool_name.lower()
    if name in _SHELL_TOOLS:
        command = arguments.get("command") or arguments.get("cmd")
        return _shell_read(command) if isinstance(command, str) else None
    viewer = name in _VIEWERS and arguments.get("command") == "view"
    if name not in _READ_TOOLS and not viewer:
        return None
    path = _path(arguments)
    if path is None:
        return None
    extra = set(arguments) - {*_PATH_KEYS, "offset", "limit", "view_range", "line_number"}
    extra.discard("command" if viewer else "")
    if extra:
        return None  # pages, patterns...: not a plain read of lines
    first = _int(arguments.get("offset")) or 1
    limit = _int(arguments.get("limit"))
    view_range = arguments.get("view_range")
    if isinstance(view_range, list) and len(view_range) == 2:
        start, end = _int(view_range[0]), _int(view_range[1])
        if start is None or end is None:
            return None
        return (path, start, None if end < 0 else end)
    return (path, first, None if limit is None else first + limit - 1)


def write_target(tool_name: str, arguments: Mapping[str, Any]) -> str | None:
    """The file a call writes whole (``Write``, ``create``), whose earlier reads it supersedes.

    An edit (``Edit``, ``sed -i``, ``str_replace``) changes some lines only: the rest of an
    earlier read still holds, and the agent's next edits quote it. Letting edits supersede
    reads lost identifiers the agent used later (bench, claude-code @32k: recall 0.9775 →
    0.9762), so they do not.

    >>> write_target("Write", {"file_path": "a.py", "content": ""}), write_target("Edit", {})
    ('a.py', None)
    """
    name = tool_name.lower()
    if name in _VIEWERS:
        return _path(arguments) if arguments.get("command") == "create" else None
    return _path(arguments) if name in _WRITE_TOOLS else None


def covers(newer: ReadTarget, older: ReadTarget) -> bool:
    """Whether ``newer`` read every line ``older`` did (same file).

    >>> covers(("a", 1, None), ("a", 5, 9)), covers(("a", 5, 9), ("a", 1, None))
    (True, False)
    """
    if newer[0] != older[0] or newer[1] > older[1]:
        return False
    return newer[2] is None or (older[2] is not None and newer[2] >= older[2])


class RereadsState(TierState):
    """Read outputs found superseded (node id to what it read); re-applied on every render,
    whatever happens later to the read that superseded it."""

    superseded: dict[str, tuple[str, int, int | None]] = msgspec.field(default_factory=dict)


def _arguments(call: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    function = call.get("function") or {}
    raw = function.get("arguments")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        arguments = None
    return str(function.get("name") or ""), arguments if isinstance(arguments, dict) else {}


def superseded_reads(view: View) -> dict[str, ReadTarget]:
    """Read outputs of ``view`` (node id to what they read) that a later read covering
    their lines, or a later write of their whole file, supersedes."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    reads: list[tuple[str, ReadTarget]] = []
    events: list[tuple[str, ReadTarget | str]] = []
    for unit in view.units:
        for item in unit.items:
            message = item.message
            for call in message.get("tool_calls") or ():
                name, arguments = _arguments(call)
                calls[str(call.get("id") or "")] = (name, arguments)
                written = write_target(name, arguments)
                if written is not None:
                    events.append(("write", written))
            if message.get("role") != "tool" or item.node_id is None:
                continue
            name, arguments = calls.get(str(message.get("tool_call_id") or ""), ("", {}))
            target = read_target(name, arguments)
            if target is not None and item.variant != "cut":
                reads.append((item.node_id, target))
                events.append((item.node_id, target))
    found: dict[str, ReadTarget] = {}
    later_reads: dict[str, list[ReadTarget]] = {}
    later_writes: set[str] = set()
    for key, event in reversed(events):
        if key == "write":
            assert isinstance(event, str)
            later_writes.add(event)
            continue
        assert not isinstance(event, str)
        newer = later_reads.setdefault(event[0], [])
        if event[0] in later_writes or any(covers(n, event) for n in newer):
            found[key] = event
        newer.append(event)
    return found


def note(handle: str, target: ReadTarget) -> str:
    """The byte-stable note a superseded read leaves."""
    path, first, last = target
    lines = "" if (first, last) == (1, None) else f" lines {first}-{last if last else 'end'}"
    return (
        f"[superseded read of {path}{lines}: the file was read again or rewritten later; "
        f'read_output("{handle}") returns this output]'
    )


def _apply(view: View, ctx: TierContext, targets: Mapping[str, ReadTarget]) -> View:
    def change(item: Item) -> Item:
        target = targets.get(item.node_id or "")
        if target is None or item.message.get("role") != "tool" or item.variant == "superseded":
            return item
        assert item.node_id is not None
        message: ChatMessage = {**item.message, "content": note(ctx.handle(item.node_id), target)}
        new = ctx.item(message, item.node_id, "superseded", item.tool_name)
        return new if new.tokens < item.tokens else item

    after, changed = map_items(view, change)
    if changed:
        ctx.act("rereads", f"noted {len(changed)} superseded read(s)", view, after, tuple(changed))
    return after


def reapply(view: View, ctx: TierContext) -> View:
    """Every render: the reads found superseded before stay notes."""
    state = ctx.state(RereadsState)
    return _apply(view, ctx, state.superseded) if state.superseded else view


def rereads(view: View, ctx: TierContext) -> View:
    """Over the trigger: every read superseded by now becomes a note, from now on."""
    started = time.perf_counter()
    state = ctx.state(RereadsState)
    new = {k: v for k, v in superseded_reads(view).items() if k not in state.superseded}
    after = _apply(view, ctx, new)
    if after is not view:
        state.superseded.update(new)
        ctx.record("rereads", view, after, started=started, details={"superseded": len(new)})
    return after


TIER = Tier("rereads", apply=reapply, compact=rereads, state=RereadsState)
