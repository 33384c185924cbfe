"""The last steps every summarizer shares: merge, focus, identifier cap, token cap.

A summary replaces the units it covers, so it has to fit the room the tier gave it
(``request.max_tokens``, counted on :meth:`SummaryResult.text`) whatever the summarizer
produced. Trimming removes the least useful items first and never a section: a reader
(or a check) always finds all five anchors.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from .._budget._tokens import TokenCounter
from ._identifiers import cap_identifiers
from ._summary import ANCHOR_TITLES, Anchors, SummaryRequest, SummaryResult

_UNION = ("execution_progress", "key_decisions", "tried_solutions")
_STOP = frozenset(
    re.findall(
        r"\w+",
        "the and for with about from into onto that this what when where which while only "
        "keep focus mostly especially please all any are was were how why who not but",
    )
)
_WORD = re.compile(r"[a-z0-9_./-]{3,}")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=\S)")
_SHORTER = (100, 60, 40)
_CARRIED_PROSE = 300


def one_line(text: str) -> str:
    """``text`` with every run of whitespace made one space."""
    return " ".join(text.split())


def shorten(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters, a cut marked with ``…``.

    >>> shorten("fix  the\\nparser", 40), shorten("abcdefghij", 5)
    ('fix the parser', 'abcd…')
    """
    text = one_line(text)
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"


def shorten_middle(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters, cut in the middle: a path keeps
    its root and, above all, its file name, which is what gets referenced again.

    >>> shorten_middle("/home/me/project/src/pkg/module_attribution.go", 30)
    '/home/m…/module_attribution.go'
    """
    text = one_line(text)
    if len(text) <= limit:
        return text
    name = text.rsplit("/", 1)[-1]
    if "/" in text and len(name) + 2 <= limit:
        return text[: limit - len(name) - 2] + "…/" + name
    head = max(0, (limit - 1) // 3)
    tail = max(0, limit - 1 - head)
    return text[:head].rstrip() + "…" + text[len(text) - tail :]


def sentences(text: str) -> list[str]:
    """``text`` split after ``.``, ``!`` or ``?`` followed by space."""
    return [part for part in (one_line(p) for p in _SENTENCE.split(text.strip())) if part]


def focus_words(focus: str | None) -> tuple[str, ...]:
    """The words of a ``/compact`` focus that items are matched on (stop words dropped).

    >>> focus_words("Keep the auth middleware and JWT errors")
    ('auth', 'middleware', 'jwt', 'errors')
    """
    if not focus:
        return ()
    words = (w.strip("./-") for w in _WORD.findall(focus.lower()))
    return tuple(dict.fromkeys(w for w in words if len(w) >= 3 and w not in _STOP))


def mentions(text: str, words: Sequence[str]) -> bool:
    lowered = text.lower()
    return any(word in lowered for word in words)


def focus_first(items: Sequence[str], words: Sequence[str]) -> tuple[str, ...]:
    """``items`` with those mentioning a focus word first (otherwise in order)."""
    if not words:
        return tuple(items)
    return tuple(sorted(items, key=lambda item: not mentions(item, words)))


def finish_summary(
    request: SummaryRequest,
    anchors: Anchors,
    prose: str,
    identifiers: Sequence[str],
    *,
    summarizer: str,
    carry_prose: bool,
    tokens_in: int = 0,
    tokens_out: int = 0,
) -> SummaryResult:
    """Merge with ``request.previous``, put focus first, cap the identifiers and fit the
    whole text in ``request.max_tokens``. ``carry_prose`` appends the previous summary's
    prose (a summarizer that already rewrote it passes False)."""
    counter = request.counter or TokenCounter()
    words = focus_words(request.focus)
    previous = request.previous
    merged = previous is not None
    if previous is not None:
        anchors = previous.anchors.merge(anchors)
        identifiers = [*identifiers, *previous.identifiers]
        if carry_prose and previous.prose.strip():
            earlier = shorten(previous.prose, _CARRIED_PROSE)
            prose = f"{prose} Earlier: {earlier}" if prose else earlier
    anchors = Anchors(**{key: focus_first(anchors.get(key), words) for key in ANCHOR_TITLES})
    if request.shown:
        identifiers = [ident for ident in identifiers if ident not in request.shown]
    idents = cap_identifiers(
        focus_first(list(dict.fromkeys(identifiers)), words),
        counter,
        max(0, request.identifier_tokens),
    )
    result = SummaryResult(
        anchors,
        one_line(prose),
        idents,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        summarizer=summarizer,
    )
    return _Fitter(result, counter, request.max_tokens, words, merged).fit()


class _Fitter:
    """Trims a result until its text fits: prose sentences, then the least useful item of
    the fullest anchor, then shorter items, then the prose, identifiers and last items.
    Below the empty skeleton (about 45 tokens) the skeleton is what is left."""

    def __init__(
        self,
        result: SummaryResult,
        counter: TokenCounter,
        max_tokens: int,
        words: Sequence[str],
        merged: bool,
    ) -> None:
        self.result = result
        self.counter = counter
        self.max_tokens = max_tokens
        self.prose = sentences(result.prose)
        self.identifiers = list(result.identifiers)
        self.items = {key: list(result.anchors.get(key)) for key in ANCHOR_TITLES}
        self.keep = {
            key: _usefulness(self.items[key], words, newest_first=merged and key in _UNION)
            for key in ANCHOR_TITLES
        }

    def current(self) -> SummaryResult:
        anchors = Anchors(
            **{key: tuple(self.items[key][i] for i in sorted(self.keep[key])) for key in self.items}
        )
        return msgspec.structs.replace(
            self.result,
            anchors=anchors,
            prose=" ".join(self.prose),
            identifiers=tuple(self.identifiers),
        )

    def fits(self) -> bool:
        return self.counter.count_text(self.current().text()) <= self.max_tokens

    def fit(self) -> SummaryResult:
        steps: list[Callable[[], bool]] = [
            lambda: _drop_last(self.prose, keep=1),
            self._drop_item,
            *(functools.partial(self._shorten, limit) for limit in _SHORTER),
            lambda: _drop_last(self.prose, keep=0),
            lambda: _drop_last(self.identifiers, keep=0),
            functools.partial(self._drop_item, minimum=1),
            functools.partial(self._shorten, 20, keys=("user_intent",)),
            lambda: _drop_last(self.keep["user_intent"], keep=0),
        ]
        for step in steps:
            while not self.fits():
                if not step():
                    break
        return self.current()

    def _drop_item(self, minimum: int = 2) -> bool:
        candidates = [
            (len(order), len(self.items[key][order[-1]]), index, key)
            for index, (key, order) in enumerate(self.keep.items())
            if len(order) >= minimum and (minimum > 1 or key != "user_intent")
        ]
        if not candidates:
            return False
        key = max(candidates)[3]
        self.keep[key].pop()
        return True

    def _shorten(self, limit: int, keys: Sequence[str] = ()) -> bool:
        changed = False
        for key in keys or ANCHOR_TITLES:
            for i in self.keep[key]:
                short = shorten(self.items[key][i], limit)
                changed = changed or short != self.items[key][i]
                self.items[key][i] = short
        return changed


def _usefulness(items: Sequence[str], words: Sequence[str], *, newest_first: bool) -> list[int]:
    """Item indexes, most useful first: focus mentions, then the newest (merged union
    anchors, whose oldest items go first as in ``Anchors.merge``) or the first listed."""
    order = list(range(len(items)))
    if newest_first:
        order.reverse()
    return sorted(order, key=lambda i: not mentions(items[i], words))


def _drop_last(values: list[Any], *, keep: int) -> bool:
    if len(values) <= keep:
        return False
    values.pop()
    return True
