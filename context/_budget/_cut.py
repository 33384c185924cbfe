"""Cutting a long text to its head and tail, with a marker that says how to read the rest.

Pure text functions, below every tier: the reduction tier, offload, the emergency tier, the
backlog and the summarizer's prompt all cut the same way, so the same output always cuts to
the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._readback import read_from


def middle_truncate(
    text: str, head: int, tail: int, node_id: str | None, mentions: Sequence[str] = ()
) -> str:
    """Keep ``head`` leading and ``tail`` trailing characters with a marker between, which
    names the identifiers the elided part ``mentions``.

    >>> middle_truncate("a" * 10 + "b" * 10, 3, 2, "N1").splitlines()[1]
    '[... 15 characters elided; page by page: read_output("N1", offset=3) ...]'
    >>> middle_truncate("a" * 10 + "b" * 10, 3, 2, None, ["parse_header"])
    'aaa\\n[... 15 characters elided; they mention parse_header ...]\\nbb'
    """
    elided = len(text) - head - tail
    if elided <= 0:
        return text
    where = f"; {read_from(node_id, head)}" if node_id else ""
    if mentions:
        where += f"; they mention {', '.join(mentions)}"
    tail_text = text[len(text) - tail :] if tail else ""
    return f"{text[:head]}\n[... {elided} characters elided{where} ...]\n{tail_text}"


def elided_part(text: str, head: int, tail: int) -> str:
    """What ``middle_truncate(text, head, tail, ...)`` leaves out (what its marker names).

    >>> elided_part("a" * 10 + "b" * 10, 3, 2)
    'aaaaaaabbbbbbbb'
    """
    return text[head : max(head, len(text) - tail)]
