"""Which file a tool call reads or writes, and which lines: the key of the re-reads tier.

A read is keyed on its arguments, not only its path: an agent reads a long file in windows
(Claude Code's ``Read`` with ``offset``/``limit``, ``sed -n 'a,bp'``, ``nl -ba f | sed -n``),
and one window never stands in for another. :func:`read_target` gives ``(path, first, last)``
with ``last`` None for "to the end"; :func:`write_target` the path a call writes or edits.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

ReadTarget = tuple[str, int, int | None]
"""A file path and the 1-based lines read, ``last`` None for the rest of the file."""

_READ_TOOLS = frozenset({"read", "fileread", "read_file", "view", "open", "cat", "notebookread"})
_WRITE_TOOLS = frozenset({"write", "filewrite", "create", "notebookedit"})
_EDIT_TOOLS = frozenset({"edit", "multiedit", "fileedit", "str_replace_editor", "apply_patch"})
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
    if name not in _READ_TOOLS:
        return None
    path = _path(arguments)
    if path is None:
        return None
    extra = set(arguments) - {*_PATH_KEYS, "offset", "limit", "view_range", "line_number"}
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
    """The file a call writes or edits (a newer version supersedes earlier reads of it)."""
    name = tool_name.lower()
    if name in _WRITE_TOOLS or name in _EDIT_TOOLS:
        if name == "str_replace_editor" and arguments.get("command") == "view":
            return None
        return _path(arguments)
    if name in _SHELL_TOOLS:
        command = arguments.get("command") or arguments.get("cmd")
        if not isinstance(command, str):
            return None
        try:
            words = shlex.split(command, comments=False)
        except ValueError:
            return None
        if len(words) >= 4 and words[0] == "sed" and words[1] == "-i" and "|" not in words:
            return words[-1] if _plain(words[-1]) else None
    return None


def covers(newer: ReadTarget, older: ReadTarget) -> bool:
    """Whether ``newer`` read every line ``older`` did (same file).

    >>> covers(("a", 1, None), ("a", 5, 9)), covers(("a", 5, 9), ("a", 1, None))
    (True, False)
    """
    if newer[0] != older[0] or newer[1] > older[1]:
        return False
    return newer[2] is None or (older[2] is not None and newer[2] >= older[2])
