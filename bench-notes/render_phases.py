"""CPU time per step of one request at 1,000 stored messages (bench-notes/render-incremental.md).

    python bench-notes/render_phases.py session            # Session.llm, one round per request
    python bench-notes/render_phases.py pydantic_ai        # the adapter scenario (_overhead.py)

Run from a checkout's root with PYTHONPATH=. (compare two checkouts by running it in each).
Times are ``time.process_time`` (this process's CPU), not wall time: the machine these notes
were measured on was shared and loaded, which wall time mostly measures. The steps are timed by
wrapping the engine's methods; each figure is the median over 20 requests after 3 warm-ups.
"""

from __future__ import annotations

import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import context._commit._committer as committer
import context._engine as engine
import context._render._cascade as cascade
import context._render._renderer as renderer
import openprogram._runtime._receipts as receipts

TIMES: dict[str, list[float]] = {}


def _wrap(owner: Any, name: str, label: str) -> None:
    inner = getattr(owner, name)

    @functools.wraps(inner)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            TIMES.setdefault(label, []).append((time.process_time() - started) * 1000)

    setattr(owner, name, timed)


def _session(folder: Path) -> Callable[[], Any]:
    from openprogram import Session
    from openprogram.testing import TestModel

    session = Session(
        folder / "a.db",
        "bench",
        budget=128_000,
        state_dir=folder / "state",
        model=TestModel(default="It is a thing."),
        system="You answer briefly.",
        history_tools=False,
    )
    for n in range(500):
        session.graph.append({"role": "user", "content": f"What is item {n}? Say it briefly."})
        session.graph.append({"role": "assistant", "content": f"Item {n} is a w{n} thing."})
    return lambda: session.llm("And the next one?")


def main(scenario: str) -> None:
    _wrap(engine.ContextEngine, "render", "render")
    _wrap(renderer.Renderer, "decide", "render.decide")
    _wrap(cascade.Cascade, "prepare", "render.decide.prepare")
    _wrap(cascade.Cascade, "finish", "render.decide.finish")
    _wrap(committer.Committer, "commit", "render.commit")
    _wrap(receipts.Receipts, "write", "render.commit.receipt")
    folder = Path(tempfile.mkdtemp())
    if scenario == "session":
        request = _session(folder)
    else:
        sys.path.insert(0, "tests/openprogram/integrations")
        import _overhead  # the adapters' benchmark scenario

        request = _overhead.request(scenario, True, folder / "a.db")
    for _ in range(3):
        request()
    TIMES.clear()
    whole = []
    for _ in range(20):
        started = time.process_time()
        request()
        whole.append((time.process_time() - started) * 1000)
    print(f"{scenario}: request {statistics.median(whole):.1f} ms CPU")
    for label, times in sorted(TIMES.items()):
        print(f"  {label:<28} {statistics.median(times):6.2f} ms  (x{len(times) // 20})")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "session")
