"""The last steps every summarizer shares: merge, focus, identifier cap, token cap.

A summary replaces the units it covers, so it has to fit the room the tier gave it
(``request.max_tokens``, counted on :meth:`SummaryResult.text`) whatever the summarizer
produced. Trimming removes the least useful items first and never a section: a reader
(or a check) always finds all five anchors.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from .._budget._tokens import TokenCounter
from ._identifiers import cap_identifiers, find_identifiers, message_text
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
CONCLUDED_CHARS = 200
"""The longest statement the "what the agent concluded" section shows."""
_CONCLUSION = re.compile(
    r"\b(?:found|because|caused by|root cause|turns out|the (?:bug|issue|problem|cause|fix)"
    r"|fixed|works|pass(?:es|ed)?|fail(?:s|ed)?|decided|chose|instead|rather than"
    r"|switch(?:ed)? to|so the|which means|confirmed)\b",
    re.IGNORECASE,
)
_PLAN = re.compile(
    r"\b(?:next|then|need to|needs to|should|todo|remaining|plan|going to)\b", re.IGNORECASE
)


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


def statement_score(text: str, recurs: Callable[[str], bool], words: Sequence[str]) -> int:
    """How useful one of the agent's statements is to keep: the identifiers it names that
    are used again later (``recurs``) count most, then a finding or decision over a plan,
    then any identifier at all; a focus mention beats everything.

    >>> later = {"parse_row"}.__contains__
    >>> statement_score("The bug is in src/export.py: parse_row drops a field.", later, ())
    6
    >>> statement_score("Let me look at the tests.", later, ())
    0
    """
    idents = set(find_identifiers(text))
    reused = sum(1 for ident in idents if recurs(ident))
    kind = 2 if _CONCLUSION.search(text) else 1 if _PLAN.search(text) else 0
    focus = 10 if mentions(text, words) else 0
    return 3 * min(reused, 3) + kind + (1 if idents else 0) + focus


def rank_conclusions(
    request: SummaryRequest,
    concluded: Sequence[str],
    scores: Sequence[int] | None,
    words: Sequence[str],
    replaced: Sequence[str] = (),
) -> list[str]:
    """The new statements (``scores``: the summarizer's own, else from how often their
    identifiers recur in the covered messages) and the previous summary's, most useful
    first: an old one (or an old next step, ``replaced``) is scored by whether its
    identifiers recur in the new rounds, so a conclusion still in use outranks newer
    chatter; at equal score the newer one wins."""
    shown = request.shown
    counts: Counter[str] = Counter()
    if scores is None or request.previous is not None:  # a summarizer's own scores need none
        for message in request.messages:
            counts.update(set(find_identifiers(message_text(message))))
    if scores is None:
        again = {i for i, n in counts.items() if n > 1 or i in shown}
        scores = [statement_score(text, again.__contains__, words) for text in concluded]
    ranked = [
        (-score, 0, at, text)
        for at, (text, score) in enumerate(zip(concluded, scores, strict=True))
    ]
    if request.previous is not None:
        since = {*counts, *shown}
        for at, text in enumerate([*request.previous.concluded, *replaced]):
            ranked.append((-statement_score(text, since.__contains__, words), 1, at, text))
    ranked.sort()
    return list(dict.fromkeys(shorten(text, CONCLUDED_CHARS) for *_, text in ranked))


def cap_lines(items: Sequence[str], counter: TokenCounter, max_tokens: int) -> tuple[str, ...]:
    """The items, in order, whose ``- item`` lines fit ``max_tokens`` together; one too long
    for what is left is skipped so a shorter one after it still gets in.

    >>> cap_lines(["a.py is the bug", "b" * 400, "c.py next"], TokenCounter(), 12)
    ('a.py is the bug', 'c.py next')
    """
    kept: list[str] = []
    used = 0
    for item in items:
        if max_tokens - used < 3:
            break
        if used + counter.count_text(f"- {item}") > max_tokens:
            continue
        trial = counter.count_text("\n".join(f"- {line}" for line in [*kept, item]))
        if trial <= max_tokens:
            kept.append(item)
            used = trial
    return tuple(kept)


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
    concluded: Sequence[str] = (),
    scores: Sequence[int] | None = None,
) -> SummaryResult:
    """Merge with ``request.previous``, put focus first, cap the identifiers and the
    agent's statements (``concluded``, ranked by :func:`rank_conclusions`) and fit the
    whole text in ``request.max_tokens``. ``carry_prose`` appends the previous summary's
    prose (a summarizer that already rewrote it passes False)."""
    counter = request.counter or TokenCounter()
    words = focus_words(request.focus)
    previous = request.previous
    merged = previous is not None
    ranked: list[str] = []
    if request.conclusion_tokens > 0:
        # a plan the new next steps replace is the agent's statement still: ranked with the rest
        replaced = previous.anchors.next_steps if previous and anchors.next_steps else ()
        ranked = rank_conclusions(request, concluded, scores, words, replaced)
    if previous is not None:
        anchors = previous.anchors.merge(anchors)
        identifiers = [*identifiers, *previous.identifiers]
        if carry_prose and previous.prose.strip():
            earlier = shorten(previous.prose, _CARRIED_PROSE)
            prose = f"{prose} Earlier: {earlier}" if prose else earlier
    anchors = Anchors(**{key: focus_first(anchors.get(key), words) for key in ANCHOR_TITLES})
    listed = [item.rstrip("…") for item in (*anchors.key_decisions, *anchors.next_steps)]
    fresh = [item for item in ranked if not any(item.startswith(head) for head in listed)]
    statements = cap_lines(fresh, counter, request.conclusion_tokens)
    if statements:  # what the statements say, the prose need not repeat
        said = "\n".join(statements)
        prose = " ".join(s for s in sentences(prose) if s.rstrip("…") not in said)
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
        concluded=statements,
    )
    return _Fitter(result, counter, request.max_tokens, words, merged).fit()


class _Fitter:
    """Trims a result until its text fits: prose sentences, then the least useful item of
    the fullest anchor, then the lower half of the agent's statements, then shorter items,
    then the prose, the other statements, identifiers and last items.
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
        self.concluded = list(result.concluded)
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
            concluded=tuple(self.concluded),
        )

    def fits(self) -> bool:
        return self.counter.count_text(self.current().text()) <= self.max_tokens

    def fit(self) -> SummaryResult:
        steps: list[Callable[[], bool]] = [
            lambda: _drop_last(self.prose, keep=1),
            self._drop_item,
            lambda: _drop_last(self.concluded, keep=-(-len(self.result.concluded) // 2)),
            *(functools.partial(self._shorten, limit) for limit in _SHORTER),
            lambda: _drop_last(self.prose, keep=0),
            lambda: _drop_last(self.concluded, keep=0),
            lambda: _drop_last(self.identifiers, keep=0),
            functools.partial(self._drop_item, minimum=1),
            functools.partial(self._shorten, 20, keys=("user_intent",)),
            lambda: _drop_last(self.keep["user_intent"], keep=0),
        ]
        for step in steps:
            while not self.fits():
                if not step():
                    break
        if self.concluded:  # the list need not repeat what the kept statements name
            said = "\n".join(self.concluded)
            self.identifiers = [ident for ident in self.identifiers if ident not in said]
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
