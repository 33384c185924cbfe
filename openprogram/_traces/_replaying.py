"""Replay a recorded trace through a session: the prompt the cascade would have sent at
each of the agent's turns, with the decisions it made, kept in the session to look at,
roll back and render again."""

from __future__ import annotations

import collections
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from context import ContextEngine, Policy, Rendered
from graph import Store
from openprogram._runtime._session import Session

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class ReplayTurn:
    """One assistant turn: the node answered, the prompt's tokens without management and
    with the cascade, and the tiers that made a new decision for it."""

    node: str
    history_tokens: int
    prompt_tokens: int
    tiers: tuple[str, ...]


@dataclass
class Replay:
    """A replayed trace: its session (layers and records included) and every turn."""

    name: str
    session: Session
    budget: int
    turns: list[ReplayTurn] = field(default_factory=list)

    @property
    def last_head(self) -> str | None:
        """The node the last turn's prompt ended at (render there to see that prompt)."""
        if not self.turns:
            return None
        before = self.session.graph.predecessor(self.turns[-1].node)
        return before.id if before else None

    def summary(self) -> dict[str, Any]:
        """Turns, turns over budget, the largest prompt, and how often each tier fired."""
        fired = collections.Counter(tier for turn in self.turns for tier in turn.tiers)
        return {
            "trace": self.name,
            "turns": len(self.turns),
            "over_budget": sum(1 for t in self.turns if t.prompt_tokens > self.budget),
            "largest_prompt": max((t.prompt_tokens for t in self.turns), default=0),
            "largest_history": max((t.history_tokens for t in self.turns), default=0),
            "tiers_fired": dict(fired),
        }

    def prompt_at(self, turn: int) -> Rendered:
        """The prompt of turn ``turn`` (0-based) as the graph stood then: the layers made
        later are not in it. A preview; it writes nothing."""
        node = self.session.graph.get(self.turns[turn].node)
        then = self.session.graph.at(node.seq - 1)
        head = self.session.graph.predecessor(node.id)
        engine = ContextEngine(then, self.session.policy, budget=self.budget)
        return engine.preview(head=head.id if head else None)

    def plot(self, ax: Axes | None = None) -> Figure:
        """Prompt tokens per turn, without management and with the cascade, the tiers
        marked where they fired (matplotlib, the ``bench`` extra)."""
        from openprogram._reports._plot import _pyplot, draw_replay

        plt = _pyplot()
        if ax is None:
            figure, ax = plt.subplots(figsize=(10, 4))
        else:
            figure = ax.figure
        draw_replay(
            ax,
            f"{self.name} at {self.budget:,} tokens ({self.session.policy.name})",
            [t.history_tokens for t in self.turns],
            [t.prompt_tokens for t in self.turns],
            [t.tiers for t in self.turns],
            self.budget,
        )
        figure.tight_layout()
        return cast("Figure", figure)


def _stopped(at: datetime) -> Callable[[], datetime]:
    return lambda: at


def replay(
    trace: str | os.PathLike[str],
    *,
    budget: int = 32_000,
    policy: Policy | None = None,
    db: str | os.PathLike[str] | Store | None = ":memory:",
    format: str | None = None,
    state_dir: str | os.PathLike[str] | None = None,
) -> Replay:
    """Import ``trace`` into a new session of ``db`` (in memory by default) and render
    every assistant turn under ``budget`` with ``policy`` (claude-code by default), at the
    time the trace recorded, as a live agent would have. The layers and records the
    cascade made stay in the session: list them, roll one back, render again.

    Offloaded outputs and record logs go to ``state_dir`` (a new temporary folder by
    default, so a replay never writes into the working folder)."""
    from openprogram.bench import load_trace

    folder = Path(state_dir) if state_dir is not None else Path(tempfile.mkdtemp(prefix="replay-"))
    chosen = policy or Policy.claude_code()
    session = Session(db, policy=chosen, budget=budget, history_tools=False, state_dir=folder)
    path = Path(trace)
    loaded = load_trace(path, format=format, graph=session.graph, seed=f"import:{session.id}")
    engine = session.engine
    counter = engine.counter
    result = Replay(path.name, session, budget)
    history = counted = 0
    clock = engine.clock
    try:
        for position, node in loaded.turns:
            while counted < position:
                history += counter.count_message(loaded.messages[counted])
                counted += 1
            engine.clock = _stopped(node.at)  # the trace's own time (idle-time tiers)
            head = session.graph.predecessor(node.id)
            rendered = engine.render(head=head.id if head else None)
            tiers = tuple(record.tier for record in rendered.records)
            result.turns.append(ReplayTurn(node.id, history, rendered.tokens, tiers))
    finally:
        engine.clock = clock
    return result
