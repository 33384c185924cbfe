"""The offline demo: the nested research agent on a scripted model, under a small budget.

Eight questions, each a ``research`` call that plans, investigates concurrently and
synthesizes, then a ``review`` that reads back what a summary hid. The budget is small on
purpose, so every tier of the claude-code preset really fires: offload, budget reduction,
microcompact, collapse, auto-compact, snip and emergency. It ends with one rollback of a
collapse. No network, no model, and its ids are seeded: on a fresh database it prints the
same figures every time, everywhere, in a few seconds.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from context import CompactionRecord, Policy, Rendered
from graph import LayerInfo, Node, Tool, new_id, seeded_ids
from openprogram._current import current_frame
from openprogram._errors import OpenProgramError
from openprogram._session import Session, open_store
from openprogram._tools import ToolSpec
from openprogram.examples.corpus import QUESTIONS, read, search
from openprogram.examples.research import research, review, scripted_model

DEMO_BUDGET = 2_200
ROOM = 300
"""Tokens a prompt needs beyond its fixed part (system prompt, tool schemas) for one round."""
SYSTEM = "You are a careful research agent. Cite the documents you used."
_EPOCH_MS = 1_767_225_600_000  # 2026-01-01: seeded ids that look like the ids of that day


def demo_policy(state_dir: Path) -> Policy:
    """The claude-code preset with thresholds scaled to a short session."""
    return Policy.claude_code(
        state_dir=state_dir,
        microcompact_first=4,
        microcompact_every=2,
        microcompact_keep=2,
        collapse_min_rounds=3,
        collapse_max_rounds=5,
        collapse_keep_recent=3,
    )


@dataclass
class DemoRun:
    """What the demo did: the session, the tiers that fired in each frame, the review's
    answer, and the rollback (the layer and the top-level render before and after)."""

    session: Session
    fired: dict[str | None, collections.Counter[str]] = field(default_factory=dict)
    answers: list[str] = field(default_factory=list)
    review: str = ""
    rolled_back: LayerInfo | None = None
    taken: list[LayerInfo] = field(default_factory=list)
    """Every layer the rollback undid: the collapse, and those built on it."""
    before: Rendered | None = None
    after: Rendered | None = None

    @property
    def records(self) -> list[CompactionRecord]:
        return self.session.engine.records()

    @property
    def read_back(self) -> Node | None:
        """The review's ``expand_function`` call (its arguments and its result)."""
        calls = [
            node
            for node in self.session.graph.nodes()
            if isinstance(node.payload, Tool) and node.payload.name == "expand_function"
        ]
        return calls[0] if calls else None


def fixed_tokens(session: Session) -> int:
    """What every prompt of an investigation holds whatever the budget: the system prompt
    and the schemas of its tools (its own and the history tools)."""
    specs = [ToolSpec(search), ToolSpec(read), *session.history.specs()]
    counter = session.engine.counter
    system = counter.count_messages([{"role": "system", "content": SYSTEM}])
    return system + counter.count_tools([spec.schema() for spec in specs])


def _seed(db: str | os.PathLike[str] | None) -> str:
    """A seed whose session id this database does not hold yet: the first demo in a
    database always gets the same one, so a fresh run repeats its figures exactly."""
    store = open_store(db)
    for n in range(1_000):
        with seeded_ids(f"openprogram demo {n}", _EPOCH_MS):
            if not store.has_session(new_id()):
                return f"openprogram demo {n}"
    raise OpenProgramError("this database holds 1,000 demo sessions; delete some or use --db")


def run_demo(
    db: str | os.PathLike[str] | None = None,
    budget: int = DEMO_BUDGET,
    *,
    state_dir: str | os.PathLike[str] = ".openprogram",
    progress: Callable[[int, int, str], None] | None = None,
) -> DemoRun:
    """Run the demo session; ``progress(done, total, what)`` is told each step."""
    with seeded_ids(_seed(db), _EPOCH_MS):
        session = Session(
            db,
            new_id(),
            model=scripted_model(),
            system=SYSTEM,
            policy=demo_policy(Path(state_dir)),
            budget=budget,
        )
        fixed = fixed_tokens(session)
        if budget < fixed + ROOM:
            session.close()
            session.store.delete_session(session.id)
            raise OpenProgramError(
                f"--budget {budget:,} is too small: the system prompt and the tool schemas "
                f"alone take {fixed:,} tokens of every prompt, which leaves no room for the "
                f"conversation; use at least {fixed + ROOM:,} (the demo's default is "
                f"{DEMO_BUDGET:,})"
            )
        run = DemoRun(session)

        def note(record: CompactionRecord) -> None:
            frame = current_frame().function
            run.fired.setdefault(frame, collections.Counter())[record.tier] += 1

        session.engine.callbacks.append(note)
        total = len(QUESTIONS) + 1
        for done, question in enumerate(QUESTIONS):
            if progress is not None:
                progress(done, total, question)
            session.graph.append({"role": "user", "content": f"Question: {question}"})
            run.answers.append(session.run(research, question))
        if progress is not None:
            progress(total - 1, total, "review")
        run.review = session.run(review, "exports")
        if progress is not None:
            progress(total, total, "done")
        _roll_back_one(run)
    return run


def _roll_back_one(run: DemoRun) -> None:
    engine = run.session.engine
    collapses = [layer for layer in engine.layers(active=True) if layer.kind == "collapse"]
    if not collapses:
        return
    layer = collapses[0]
    run.before = engine.preview()
    done = engine.rollback(layer.id, reason="demo: show what the collapse hid")
    run.rolled_back = engine.layer(layer.id)
    run.taken = [engine.layer(info.id) for info in done]
    run.after = engine.preview()
