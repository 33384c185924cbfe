"""Which redactor applies where: before a summarizer and in records (on by default), in
offloaded files and the history tools' answers (when asked), everywhere a session that
redacts what it stores writes.

A graph made with ``redactor=`` stores every record redacted, so what is read back from it
is clean already; its redactor (plus the policy's extra patterns) is used for the rest too,
so a session's custom patterns reach its summaries and records.
"""

from __future__ import annotations

from typing import TypeVar

from graph import Redactor

from ._policy import Policy

T = TypeVar("T")


def _stored(policy: Policy, graph: object) -> Redactor | None:
    found: Redactor | None = getattr(graph, "redactor", None)
    return None if found is None else found.with_patterns(policy.redact_patterns)


def summary_redactor(policy: Policy, graph: object) -> Redactor | None:
    """What redacts the text that reaches a summarizer, a summary or a record: the graph's
    own redactor, else the policy's (``redact_summaries``, on by default), else none."""
    stored = _stored(policy, graph)
    if stored is not None:
        return stored
    return Redactor(policy.redact_patterns) if policy.redact_summaries else None


def output_redactor(policy: Policy, graph: object) -> Redactor | None:
    """What still has to redact offloaded files and the history tools' answers: the
    policy's redactor when ``redact_outputs`` asks for it; for a graph that redacts what it
    stores (its text is clean already), only the policy's extra patterns, if any."""
    if getattr(graph, "redactor", None) is not None:
        extra = policy.redact_patterns
        return Redactor(extra, defaults=False) if extra else None
    return Redactor(policy.redact_patterns) if policy.redact_outputs else None


def clean_records(records: list[T], policy: Policy, graph: object) -> list[T]:
    """``records`` as they may be written, logged and handed to callbacks: redacted (a
    summary, an error text or a detail can quote what a tool printed)."""
    if not records:  # most renders make none: no redactor built for them
        return records
    redactor = summary_redactor(policy, graph)
    return records if redactor is None else [redactor.value(record) for record in records]
