"""What every summarizer takes and gives: a request of units, a result of five anchors.

Collapse (tier 3) and auto-compact (tier 4) ask a :class:`Summarizer` for a summary of the
units they replace. The result always carries all five anchors (an empty one reads
``N/A``), so what a summary kept can be checked by a program, plus prose and the
identifiers the covered units touched. A summary builds on the previous one: anchors
merge as a union (:meth:`Anchors.merge`), so an LLM that forgets an old decision in an
incremental update cannot drop it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from graph import ChatMessage, Node, ToolSchema

from .._budget._tokens import TokenCounter
from .._errors import SummaryError
from .._view import Unit

ANCHOR_TITLES: dict[str, str] = {
    "user_intent": "User Intent",
    "execution_progress": "Execution Progress",
    "key_decisions": "Key Decisions",
    "tried_solutions": "Tried Solutions",
    "next_steps": "Next Steps",
}
"""The five anchors, in the order a summary shows them."""

NA = "N/A"
CONCLUDED_TITLE = "What the Agent Concluded"
"""The section of the agent's own statements (findings, decisions, files, next steps),
ranked by later use, beside the anchors: what a compaction otherwise loses most."""
_LATEST_WINS = ("next_steps",)
_MAX_ITEMS = 12
_MAX_INTENT = 16
"""User messages the intent keeps: the task and the newest others (each bounded)."""


class Anchors(msgspec.Struct, frozen=True):
    """The five anchors; each is a tuple of one-line items (empty reads ``N/A``).

    >>> old = Anchors(key_decisions=("use chi: fast",), next_steps=("add auth",))
    >>> new = Anchors(key_decisions=("index by path",), next_steps=("write tests",))
    >>> merged = old.merge(new)
    >>> merged.key_decisions, merged.next_steps
    (('use chi: fast', 'index by path'), ('write tests',))
    """

    user_intent: tuple[str, ...] = ()
    execution_progress: tuple[str, ...] = ()
    key_decisions: tuple[str, ...] = ()
    tried_solutions: tuple[str, ...] = ()
    next_steps: tuple[str, ...] = ()

    def get(self, key: str) -> tuple[str, ...]:
        value: tuple[str, ...] = getattr(self, key)
        return value

    def merge(self, newer: Anchors) -> Anchors:
        """Union with a newer summary's anchors: what the newer one says is kept, and what
        only the older one said is kept too (next steps: the newest non-empty value wins,
        since an old plan that was carried out is no longer the plan). The user's intent
        keeps every request in order, the task first: a compaction over a compaction must
        not lose what the person asked before."""
        values: dict[str, tuple[str, ...]] = {}
        for key in ANCHOR_TITLES:
            old, new = self.get(key), newer.get(key)
            if key in _LATEST_WINS:
                values[key] = new or old
            elif key == "user_intent":
                union = list(dict.fromkeys([*old, *new]))
                if len(union) > _MAX_INTENT:
                    union = [union[0], *union[len(union) - _MAX_INTENT + 1 :]]
                values[key] = tuple(union)
            else:
                union = list(dict.fromkeys([*old, *new]))
                values[key] = tuple(union[-_MAX_ITEMS:])
        return Anchors(**values)

    def as_dict(self) -> dict[str, list[str]]:
        return {key: list(self.get(key)) or [NA] for key in ANCHOR_TITLES}

    @property
    def empty(self) -> bool:
        return not any(self.get(key) for key in ANCHOR_TITLES)


class SummaryResult(msgspec.Struct, frozen=True):
    """A summary: five anchors, prose, the identifiers the covered units touched, and what
    producing it cost (``tokens_in``/``tokens_out`` are 0 for a summarizer with no LLM).
    ``concluded`` are the agent's own statements, the most useful first (see
    ``SummaryRequest.conclusion_tokens``)."""

    anchors: Anchors
    prose: str = ""
    identifiers: tuple[str, ...] = ()
    tokens_in: int = 0
    tokens_out: int = 0
    summarizer: str = ""
    concluded: tuple[str, ...] = ()

    def text(self, *, identifiers: bool = True) -> str:
        """The summary as the markdown block a prompt carries."""
        lines = ["## Anchors"]
        for key, title in ANCHOR_TITLES.items():
            lines.append(f"### {title}")
            items = self.anchors.get(key)
            lines.extend(f"- {item}" for item in items) if items else lines.append(f"- {NA}")
        if self.concluded:
            lines += [f"## {CONCLUDED_TITLE}", *(f"- {item}" for item in self.concluded)]
        if self.prose.strip():
            lines += ["## Summary", self.prose.strip()]
        if identifiers and self.identifiers:
            lines += ["## Identifiers", ", ".join(self.identifiers)]
        return "\n".join(lines)


class SummaryRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What to summarize and within what limits.

    ``units`` are the covered units with their *original* messages (no tier's placeholder);
    ``nodes`` maps their node ids to the nodes (a failed tool call or function shows there);
    ``task`` is the first task's text; ``previous`` the summary this one builds on
    (incremental); ``focus`` the user's instructions (``/compact focus``); ``max_tokens``
    caps the summary; ``system`` and ``tools`` are the agent's prompt prefix, which an LLM
    summarizer on the agent's ``model`` may send first so the provider's cache is reused.
    """

    kind: Literal["segment", "compact"]
    units: tuple[Unit, ...]
    nodes: Mapping[str, Node] = msgspec.field(default_factory=dict)
    task: str | None = None
    previous: SummaryResult | None = None
    focus: str | None = None
    max_tokens: int = 300
    identifier_tokens: int = 80
    """Cap of the identifier list (tokens); 0 turns the list off."""
    conclusion_tokens: int = 120
    """Cap of the "what the agent concluded" section (tokens); 0 turns it off."""
    system: str | None = None
    tools: tuple[ToolSchema, ...] = ()
    counter: TokenCounter | None = None
    model: str | None = None
    """The agent's model (``Policy.model``): a summarizer on the same model can share the
    agent's cached prefix (``system``, ``tools``); another model cannot."""
    sources: tuple[Unit, ...] = ()
    """The covered units as stored, when ``units`` were shortened or sampled to bound what
    an LLM is sent (C9): a summarizer ranks identifiers from these locally, at no LLM cost."""
    shown: frozenset[str] = frozenset()
    """Identifiers the prompt still shows beside the summary (what a compaction keeps): the
    identifier list leaves them out, to hold what the prompt loses. Not part of what makes
    two requests the same question: a summary of the same units made beside other kept
    rounds is still theirs, and an unchanged segment is never summarized twice."""

    @property
    def covered(self) -> tuple[Unit, ...]:
        """Every unit the summary covers (``units`` may be a sample of them)."""
        return self.sources or self.units

    @property
    def left_out(self) -> int:
        """How many covered units the request does not show (sampled to stay bounded)."""
        return len(self.sources) - len(self.units) if self.sources else 0

    @property
    def messages(self) -> list[ChatMessage]:
        """The covered messages identifiers are ranked from (``sources`` when given)."""
        return [item.message for unit in self.covered for item in unit.items]

    @property
    def node_ids(self) -> list[str]:
        return list(dict.fromkeys(n for unit in self.covered for n in unit.node_ids))


@runtime_checkable
class Summarizer(Protocol):
    """Anything with a ``name`` and ``summarize(request) -> SummaryResult``.

    A summarizer may raise or return garbage: the tier that called it falls back to a
    cheaper one and records why (fail-open), so no render ever depends on it.
    """

    name: str

    def summarize(self, request: SummaryRequest) -> SummaryResult: ...


_HEADER = re.compile(r"^\s*#{2,4}\s*(.+?)\s*:?\s*$")
_BY_TITLE = {title.lower(): key for key, title in ANCHOR_TITLES.items()}
_CONCLUDED = "concluded"


def parse_summary(text: str) -> tuple[Anchors, str]:
    """Anchors and prose from a summary in the markdown layout :meth:`SummaryResult.text`
    writes (what LLM summarizers are asked for). Missing anchors are empty; raises
    :class:`SummaryError` when the text has none of the five sections.

    >>> anchors, prose = parse_summary("### User Intent\\nfix parse()\\n## Summary\\nok")
    >>> anchors.user_intent, anchors.next_steps, prose
    (('fix parse()',), (), 'ok')
    """
    anchors, prose, _ = parse_reply(text)
    return anchors, prose


def parse_reply(text: str) -> tuple[Anchors, str, tuple[str, ...]]:
    """:func:`parse_summary` plus the items of the "what the agent concluded" section
    (empty when the text has none).

    >>> parse_reply("### Next Steps\\n- N/A\\n## What the Agent Concluded\\n- a.py is it")[2]
    ('a.py is it',)
    """
    sections, prose = _sections(text)
    concluded = _items(sections.pop(_CONCLUDED, []))
    if not sections:
        raise SummaryError("the reply has none of the five anchor sections")
    values = {key: _items(lines) for key, lines in sections.items()}
    return Anchors(**values), "\n".join(prose).strip(), concluded


def concluded_in(text: str) -> tuple[str, ...]:
    """The items of a summary's "what the agent concluded" section (none without one), as
    :func:`parse_reply` reads them, from any text: a note or a summary without anchors too.

    >>> concluded_in("[3 rounds left out]\\n## What the Agent Concluded\\n- a.py is it")
    ('a.py is it',)
    """
    return _items(_sections(text)[0].get(_CONCLUDED, []))


def _sections(text: str) -> tuple[dict[str, list[str]], list[str]]:
    """The lines under each known header (anchor keys and ``_CONCLUDED``), and the prose."""
    sections: dict[str, list[str]] = {}
    prose: list[str] = []
    current: list[str] | None = None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            title = header.group(1).strip().lower()
            if title in _BY_TITLE:
                current = sections.setdefault(_BY_TITLE[title], [])
            elif title == "summary":
                current = prose
            elif title == CONCLUDED_TITLE.lower():
                current = sections.setdefault(_CONCLUDED, [])
            else:
                current = None
            continue
        if current is not None:
            current.append(line)
    return sections, prose


def _items(lines: list[str]) -> tuple[str, ...]:
    items = []
    for line in lines:
        item = line.strip().removeprefix("- ").removeprefix("* ").strip()
        if item and item.upper() not in (NA, "- N/A", "NONE"):
            items.append(item)
    return tuple(items)


def anchors_from_dict(value: Mapping[str, Any] | None) -> Anchors:
    """Anchors from :meth:`Anchors.as_dict` output (records and layer metadata store that)."""
    if not value:
        return Anchors()
    values = {}
    for key in ANCHOR_TITLES:
        items = value.get(key) or []
        values[key] = tuple(str(i) for i in items if str(i) != NA)
    return Anchors(**values)
