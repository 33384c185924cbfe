"""Identifiers a summary must carry verbatim: paths, code names, error codes, ranked by use.

An agent that resumes from a summary needs the exact names it worked with; a path or a
function name it has to guess costs a turn. What counts as an identifier follows the
bench's reference recall: a token of six or more characters with ``_``, ``/``, an inner
``.`` or a camelCase hump, plus short error codes (``E501``, ``ERR_X``, ``HTTP 504``,
``ENOENT``). Node ids, call ids and hashes are left out: nobody types them from memory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from graph import text_of

from .._budget._tokens import TokenCounter
from .._view import Unit
from ._transcript import NOT_SAID

_ERRNO = (
    "NOENT|ACCES|PERM|EXIST|ISDIR|NOTDIR|NOTEMPTY|INVAL|PIPE|AGAIN|BUSY|NOSPC|NOMEM|MFILE|"
    "ROFS|XDEV|LOOP|NAMETOOLONG|CONNREFUSED|CONNRESET|CONNABORTED|ADDRINUSE|TIMEDOUT|"
    "NOTCONN|HOSTUNREACH|NETUNREACH"
)
_CODE = (
    rf"HTTP[ /]?[1-5][0-9]{{2}}|[A-Z]{{1,4}}[0-9]{{3,5}}|E(?:{_ERRNO})"
    r"|[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]"
)
_TOKEN = re.compile(
    rf"(?P<code>\b(?:{_CODE})\b)"
    r"|(?P<prefix>~/|\.{1,2}/|/|\.)?(?P<core>[A-Za-z_][A-Za-z0-9_./:-]{5,})"
)
_CODE_ONLY = re.compile(rf"(?:{_CODE})")
_CAMEL = re.compile(r"[a-z][A-Z]")
_ULID = re.compile(r"(?<![0-9A-Za-z])[0-9A-HJKMNP-TV-Z]{26}(?![0-9A-Za-z])")
_RUN = re.compile(r"[A-Za-z0-9]{12,}")
_HEX = re.compile(r"[0-9a-fA-F]{16,}")
_SCAN_LIMIT = 2000


def message_text(message: Mapping[str, Any], *, names: bool = True) -> str:
    """A message's searchable text: its content plus each tool call's name (unless
    ``names`` is False) and arguments, since an agent often names a file only inside a call.

    >>> call = {"function": {"name": "Read", "arguments": '{"path": "src/app.py"}'}}
    >>> message_text({"role": "assistant", "content": "Reading.", "tool_calls": [call]})
    'Reading.\\nRead\\nsrc/app.py'
    """
    pieces = [text_of(message.get("content"))]
    for function in _functions(message):
        if names:
            pieces.append(str(function.get("name") or ""))
        pieces.extend(_values(function.get("arguments")))
    return "\n".join(piece for piece in pieces if piece)


def _functions(message: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The ``function`` part of each well-formed tool call of a message."""
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            yield function


def _values(arguments: Any) -> list[str]:
    """The string values of a call's arguments (JSON keys such as ``file_path`` are schema,
    not something the conversation named)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return [arguments]
    if isinstance(arguments, Mapping):
        return [text for value in arguments.values() for text in _values(value)]
    if isinstance(arguments, list | tuple):
        return [text for value in arguments for text in _values(value)]
    return [] if arguments is None else [str(arguments)]


def _noise(ident: str) -> bool:
    """Random-looking runs (hashes, call ids): long and digit-heavy, or long hex."""
    for run in _RUN.findall(ident):
        digits = sum(c.isdigit() for c in run)
        if digits * 10 >= len(run) * 3 or (digits and _HEX.fullmatch(run)):
            return True
    return False


def find_identifiers(text: str) -> list[str]:
    """Every identifier occurrence in ``text``, in order (repeats included).

    >>> find_identifiers("Edit /src/app.py: fix parse_header, see E501 and HTTP 504")
    ['/src/app.py', 'parse_header', 'E501', 'HTTP 504']
    >>> find_identifiers("node 01JF3ZQ8W5M2N4P6R8T0V2X4Y6, 12.5, call_9f8e7d6c5b4a3f2e at https://x.io")
    ['https://x.io']
    """
    found: list[str] = []
    for match in _TOKEN.finditer(_ULID.sub(" ", text)):
        if match.group("code"):
            found.append(match.group("code"))
            continue
        core = match.group("core").rstrip(".:-/")
        if len(core) < 6:
            continue
        if "_" in core or "/" in core or "." in core[1:-1] or _CAMEL.search(core):
            ident = (match.group("prefix") or "") + core
            if not _noise(ident):
                found.append(ident)
        elif _CODE_ONLY.fullmatch(core):
            found.append(core)
    return found


def ranked_identifiers(texts: Iterable[str]) -> list[str]:
    """Distinct identifiers, the most used first (ties: the first to appear).

    >>> ranked_identifiers(["read a/b.py", "edit c/d.py then a/b.py"])
    ['a/b.py', 'c/d.py']
    """
    return _by_use((text, 1) for text in texts)


def _by_use(weighted: Iterable[tuple[str, int]]) -> list[str]:
    """The identifiers of each text counted ``weight`` times each, the most used first
    (ties: the first to appear)."""
    counts: dict[str, int] = {}
    for text, weight in weighted:
        for ident in find_identifiers(text):
            counts[ident] = counts.get(ident, 0) + weight
    order = {ident: index for index, ident in enumerate(counts)}
    return sorted(counts, key=lambda ident: (-counts[ident], order[ident]))


AUTHORED_WEIGHT = 3
"""How much more a use in what the user or the agent wrote counts than one in a tool's
output: an agent reuses the names it typed itself (the files it edits, the functions it
writes), while an output mentions many it never touches again. 3 on the tuning half
(bench, claude-code): recall at 16k/32k 0.9637 → 0.9661 / 0.9914 → 0.9951 at the same cost
(2: 0.9642 / 0.9935; 6: as 3); at 8k 0.8834 → 0.8800."""


def ranked_unit_identifiers(units: Iterable[Unit]) -> list[str]:
    """Distinct identifiers of ``units``, by use: one the user or the agent wrote (a
    message's text or a tool call's arguments) counts ``AUTHORED_WEIGHT`` times; one in a
    tool's output, in what a layer, note or stub shows (an earlier summary), or a tool's own
    name, once.
    Ties: the first to appear.

    >>> from context._view import Item
    >>> def unit(role, text):
    ...     return Unit((Item({"role": role, "content": text}, 1),), "round", 0)
    >>> ranked_unit_identifiers([unit("tool", "a/b.py a/b.py c/d.py"),
    ...                          unit("assistant", "I will edit c/d.py")])
    ['c/d.py', 'a/b.py']
    """
    return _by_use(_weighted_texts(units))


def _weighted_texts(units: Iterable[Unit]) -> Iterator[tuple[str, int]]:
    for unit in units:
        shown = unit.kind in NOT_SAID
        for item in unit.items:
            message = item.message
            weight = 1 if shown or message.get("role") == "tool" else AUTHORED_WEIGHT
            yield message_text(message, names=False), weight
            for function in _functions(message):
                if function.get("name"):
                    yield str(function["name"]), 1


def cap_identifiers(
    identifiers: Iterable[str], counter: TokenCounter, max_tokens: int
) -> tuple[str, ...]:
    """The identifiers, in order, that fit ``", ".join(...)`` in ``max_tokens``: one too
    long for what is left is skipped so shorter ones after it still get in.

    >>> cap_identifiers(["a/b.py", "c/d.py", "e/f.py"], TokenCounter(), 7)
    ('a/b.py', 'c/d.py')
    """
    kept: list[str] = []
    used = 0
    for scanned, ident in enumerate(dict.fromkeys(identifiers)):
        if max_tokens - used < 2 or scanned >= _SCAN_LIMIT:
            break
        if used + counter.count_text(", " + ident) - 1 > max_tokens:
            continue
        trial = counter.count_text(", ".join([*kept, ident]))
        if trial <= max_tokens:
            kept.append(ident)
            used = trial
    return tuple(kept)


def rank_identifiers(
    texts: Iterable[str], counter: TokenCounter, max_tokens: int
) -> tuple[str, ...]:
    """Identifiers found in ``texts``, the most used first, as many as fit ``max_tokens``
    tokens once joined with ``", "`` (0 gives none). Deterministic.

    >>> texts = ["pytest tests/test_parse.py", "parse_header fails in tests/test_parse.py"]
    >>> rank_identifiers(texts, TokenCounter(), 80)
    ('tests/test_parse.py', 'parse_header')
    >>> rank_identifiers(texts, TokenCounter(), 0)
    ()
    """
    if max_tokens <= 0:
        return ()
    return cap_identifiers(ranked_identifiers(texts), counter, max_tokens)
