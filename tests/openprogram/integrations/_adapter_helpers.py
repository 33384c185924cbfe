"""What the adapter tests share: a lookup tool, a small-budget session where collapse fires
within ten rounds, and the checks every adapter test makes."""

from __future__ import annotations

import re
from pathlib import Path

from context import COLLAPSE_FIRST_CASCADE, Policy
from graph import LayerInfo, layer_handle
from openprogram import Session, node_text

ROUNDS = 10
BUDGET = 3_400
"""Counted as sent (the adapters count each message's JSON): 3,000 before, scaled with it."""
EXPAND = re.compile(r'expand_layer\("(L[0-9]+)"\)')  # a layer's handle
SYSTEM = "You look things up."
TASK = "Look up k_1 to k_10."


def lookup(key: str) -> str:
    """Look up a key in the knowledge base.

    Args:
        key: what to look up, like k_3
    """
    words = " ".join(f"w{i}" for i in range(120))
    return f"value of {key}: {words} end of {key}"


def small_session(tmp_path: Path) -> Session:
    """A SQLite session under a 3,400-token budget, collapsing segments of 2–3 rounds (the
    claude-code preset with collapse before auto-compact, and Claude Code's microcompact
    count trigger, so that the budget is met by collapsing)."""
    policy = Policy.claude_code(
        None,
        cascade=COLLAPSE_FIRST_CASCADE,
        microcompact_first=50,
        microcompact_every=25,
        collapse_min_rounds=2,
        collapse_max_rounds=3,
        collapse_keep_recent=3,
    )
    return Session(tmp_path / "op.db", budget=BUDGET, policy=policy, state_dir=tmp_path / "state")


def newest_layer(session: Session) -> LayerInfo:
    """The newest active layer no other layer builds on (a rollback restores just it)."""
    layers = [info for info in session.graph.layers(active=True)]
    built_on = {b for info in layers for b in info.layer.builds_on}
    return [info for info in layers if info.id not in built_on][-1]


def restored_texts(session: Session, layer: LayerInfo) -> list[str]:
    """What a rollback of ``layer`` must show again: the summaries of the layers it built
    on (each names itself), and the texts of the other messages it stood for."""
    under = {
        node
        for info in session.graph.layers()
        if info.id in layer.layer.builds_on
        for node in info.layer.covers
    }
    built = [session.graph.layer(b) for b in layer.layer.builds_on]
    texts = [f'expand_layer("{layer_handle(info)}")' for info in built]
    for node in layer.covers:
        text = node_text(session.graph.get(node))
        if node not in under and text:
            texts.append(text)
    assert texts
    return texts
