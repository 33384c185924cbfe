"""Counts in sentences: "1 compaction", "2 compactions" (one place for plural agreement in
what the CLI, the demo and the tables print)."""

from __future__ import annotations

__all__ = ["counted"]

_IRREGULAR = {"synthesis": "syntheses", "is": "are", "was": "were"}


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, the noun in the plural unless the count is one (``plural``:
    a form the rules below do not make); the count with thousands separators.

    >>> counted(1, "compaction"), counted(2, "compaction"), counted(0, "tool call")
    ('1 compaction', '2 compactions', '0 tool calls')
    >>> counted(1_200, "entry"), counted(3, "synthesis"), counted(2, "process")
    ('1,200 entries', '3 syntheses', '2 processes')
    """
    if count == 1:
        return f"1 {noun}"
    if plural is None:
        head, _, last = noun.rpartition(" ")
        plural = (head + " " if head else "") + _plural(last)
    return f"{count:,} {plural}"


def _plural(word: str) -> str:
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "o", "u"):
        return word[:-1] + "ies"
    return word + "s"
