"""What a call asked for, and the lines of a long text that answer it.

An offloaded output's preview shows its head and tail; what the agent wanted from it (the
grep pattern, the symbol it looked for, the test it ran) is often in the middle. The call's
arguments and the text the agent wrote before it say what that was: their terms pick the
lines of the hidden middle shown beside head and tail. A term that most lines hold (a
path every grep hit starts with) picks nothing. The choice depends only on the output,
the call and its message, which never change: the preview is the same bytes on every
render and in every engine.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .._summaries._identifiers import find_identifiers, message_text
from .._view import View

__all__ = [
    "ASKED_LINE_CHARS",
    "ASKED_SCAN_CHARS",
    "asked_for",
    "asked_identifiers",
    "asked_lines",
    "asked_terms",
]

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
_COMMON_WORDS = (
    "this that with from what when where will then there these those have been into each "
    "file files line lines read grep bash python true false none null self return import "
    "def class test tests code find path name let check look see also need using use "
    "make sure should would could just first next some more only other about which their "
    "them does done run here head tail echo print"
)
_COMMON = frozenset(_COMMON_WORDS.split())
ASKED_SCAN_CHARS = 1_000_000
"""The lines picked come from at most this many characters of the hidden part (a 20 MB
output is not searched whole on the render path)."""
ASKED_LINE_CHARS = 240
"""A line picked is shown up to this many characters (a minified line is not sent whole)."""
_COMMON_SHARE = 0.2
"""A term found in more than this share of the lines picks nothing: it does not choose."""


def asked_terms(text: str) -> frozenset[str]:
    """Terms of what a call asked for: its identifiers and the words they and the rest are
    made of (four or more characters, common words left out), lower-cased.

    >>> sorted(asked_terms("grep -n 'parse_header' src/app.py"))
    ['header', 'parse', 'parse_header', 'src/app.py']
    """
    terms = {ident.lower() for ident in find_identifiers(text)}
    for word in _WORD.findall(text):
        lowered = word.lower()
        terms.add(lowered)
        terms.update(part for part in lowered.split("_") if len(part) >= 4)
    return frozenset(t for t in terms if t not in _COMMON)


def asked_for(view: View) -> dict[str, str]:
    """Per tool call id: what it asked for, its arguments and its message's text."""
    asked: dict[str, str] = {}
    for unit in view.units:
        for item in unit.items:
            message = item.message
            calls = message.get("tool_calls")
            if not calls or message.get("role") != "assistant":
                continue
            text = message_text({"content": message.get("content")})
            for call in calls:
                if not isinstance(call, Mapping):
                    continue
                own = message_text({"tool_calls": [call]}, names=False)
                asked[str(call.get("id") or "")] = f"{own}\n{text}"
    return asked


def asked_lines(
    text: str, terms: Iterable[str], room: int, *, order: bool = True
) -> list[tuple[int, str]]:
    """Lines of ``text`` (1-based number, line) that hold the most distinct ``terms``,
    in the order they stand (``order``; else those holding the most first), as many as
    fit ``room`` characters.

    >>> asked_lines("a\\nb parse_header\\nc\\nparse_header x\\n", {"parse_header"}, 100)
    [(2, 'b parse_header'), (4, 'parse_header x')]
    """
    wanted = frozenset(terms)
    if room <= 0 or not wanted:
        return []
    lines = text.split("\n")
    hits: list[tuple[int, frozenset[str]]] = []
    found: dict[str, int] = {}
    for number, line in enumerate(lines):
        lowered = line.lower()
        held = frozenset(t for t in wanted if t in lowered)
        if held:
            hits.append((number, held))
            for term in held:
                found[term] = found.get(term, 0) + 1
    common = {t for t, n in found.items() if n > max(2, _COMMON_SHARE * len(lines))}
    scored: list[tuple[int, int, int]] = []
    for number, held in hits:
        choosing = held - common
        if choosing:
            weight = sum(2 if not t.isalpha() else 1 for t in choosing)
            scored.append((-weight, number, len(lines[number])))
    picked: list[tuple[int, str]] = []
    used = 0
    for _weight, number, _length in sorted(scored):
        line = _clipped(lines[number].strip())
        if not line or used + len(line) + 8 > room:
            continue
        picked.append((number + 1, line))
        used += len(line) + 8
    return sorted(picked) if order else picked


def asked_identifiers(text: str, terms: Iterable[str], shown: str) -> list[str]:
    """Identifiers of the lines of ``text`` that hold ``terms`` (those holding the most
    first), less those ``shown`` already holds: what a preview's list names first.

    >>> asked_identifiers("x\\nparse_header in src/a.py\\n", {"parse_header"}, "")
    ['parse_header', 'src/a.py']
    """
    picked = asked_lines(text, terms, len(text) + 8 * text.count("\n") + 8, order=False)
    found = [ident for _, line in picked for ident in find_identifiers(line)]
    return [ident for ident in dict.fromkeys(found) if ident not in shown]


def _clipped(line: str) -> str:
    return line if len(line) <= ASKED_LINE_CHARS else line[: ASKED_LINE_CHARS - 1] + "…"


def asked_block(picked: list[tuple[int, str]]) -> str:
    """The picked lines as a preview shows them, each with its line number."""
    return "\n".join(f"{number}: {line}" for number, line in picked)


def call_of(message: Mapping[str, Any]) -> str:
    """The call id a tool message answers ("" when none)."""
    return str(message.get("tool_call_id") or "")
