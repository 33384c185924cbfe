"""The offline demo: the nested research agent on a scripted model, under a small budget.

Eight questions, each a ``research`` call that plans, investigates concurrently and
synthesizes, then a ``review`` that reads back what a summary hid. The budget is small on
purpose, so the tiers of the claude-code preset really fire: offload, microcompact, collapse,
auto-compact and snip (emergency, the last resort, should not be needed). It ends with one
rollback of a collapse. No network, no model: it runs the same everywhere, in a few seconds.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from context import (
    COLLAPSE_FIRST_CASCADE,
    CompactionRecord,
    Policy,
    Rendered,
    as_layer_kind,
    state_folder,
)
from graph import LayerInfo, Node, Tool, new_id, open_store, seeded_ids
from openprogram._errors import OpenProgramError
from openprogram._runtime._current import current_frame
from openprogram._runtime._session import Session
from openprogram._runtime._tools import ToolSpec
from openprogram.examples.corpus import QUESTIONS, read, search
from openprogram.examples.research import research, review, scripted_model

DEMO_BUDGET = 2_200
ROOM = 300
"""Tokens a prompt needs beyond its fixed part (system prompt, tool schemas) for one round."""
SYSTEM = "You are a careful research agent. Cite the documents you used."
_EPOCH_MS = 1_767_225_600_000  # 2026-01-01: seeded ids that look like the ids of that day


def demo_policy() -> Policy:
    """The claude-code preset with thresholds scaled to a short session and a small budget:
    summaries short enough to pay for themselves on its short rounds (a layer must save 30%
    of what it covers), and outputs offloaded or cut to previews that fit the budget, so the
    emergency tier has nothing left to do (it acted on 7 of 69 renders with the defaults).
    Collapse comes before auto-compact, so that the story shows every tier."""
    return Policy.claude_code(
        cascade=COLLAPSE_FIRST_CASCADE,
        microcompact_first=4,
        microcompact_every=2,
        microcompact_keep=2,
        collapse_min_rounds=3,
        collapse_max_rounds=5,
        collapse_keep_recent=3,
        collapse_summary_tokens=80,
        compact_summary_tokens=200,
        identifier_tokens=40,
        offload_chars=3_000,
        budget_reduction_chars=1_500,
        reduction_head_chars=900,
        reduction_tail_chars=600,
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


def _seed(db: str | os.PathLike[str] | None, state_dir: Path) -> str:
    """A seed whose session id neither this database nor the state folder knows yet: the
    first demo in a fresh database and folder always gets the same one, so it repeats its
    figures exactly (ids are in the prompts, and other ids tokenize differently)."""
    store = open_store(db)
    for n in range(1_000):
        with seeded_ids(f"openprogram demo {n}", _EPOCH_MS):
            session = new_id()
        used = (state_dir / "records" / f"{session}.jsonl").exists() or (
            state_dir / "tool_results" / session
        ).exists()
        if not used and not store.has_session(session):
            return f"openprogram demo {n}"
    raise OpenProgramError("this database holds 1,000 demo sessions; delete some or use --db")


def run_demo(
    db: str | os.PathLike[str] | None = None,
    budget: int = DEMO_BUDGET,
    *,
    state_dir: str | os.PathLike[str] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> DemoRun:
    """Run the demo session; ``progress(done, total, what)`` is told each step."""
    folder = state_folder(open_store(db), state_dir).path
    with seeded_ids(_seed(db, folder), _EPOCH_MS):
        session = Session(
            db,
            new_id(),
            model=scripted_model(),
            system=SYSTEM,
            policy=demo_policy(),
            budget=budget,
            state_dir=state_dir,
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
    collapses = [i for i in engine.layers(active=True) if as_layer_kind(i.kind) == "collapse"]
    if not collapses:
        return
    layer = collapses[0]
    run.before = engine.preview()
    done = engine.rollback(layer.id, reason="demo: show what the collapse hid")
    run.rolled_back = engine.layer(layer.id)
    run.taken = [engine.layer(info.id) for info in done]
    run.after = engine.preview()
