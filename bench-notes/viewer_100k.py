"""The viewer's pages on a 100,000-node session, each the first time it is asked for
(issue 35, item 5; figures in bench-notes/viewer-100k.md).

    PYTHONPATH=<checkout> .venv/bin/python bench-notes/viewer_100k.py build DB [--calls 30]
    PYTHONPATH=<checkout> .venv/bin/python bench-notes/viewer_100k.py pages DB [--rounds 3]

``build`` appends the scale bench's 100,000 messages to session ``big`` and makes
``--calls`` LLM calls through ``Session`` with the test model (receipts keep their
prompts; the first render folds the backlog into one layer). ``pages`` loads the graph once
(timed), then times each page on a fresh viewer handed that graph and nothing else, and
prints the median and max of ``--rounds``. It runs whatever checkout ``PYTHONPATH`` names
(the figures "before" ran main's tree from ``git archive``); ``view --html`` is timed with
``/usr/bin/time -v`` around the CLI itself.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any


def build(db: str, calls: int) -> None:
    from graph import ConversationGraph, dispose_engines
    from openprogram import Session
    from openprogram.bench._scale_steps import iter_messages
    from openprogram.testing import TestModel

    started = time.perf_counter()
    g = ConversationGraph.open(db, session="big")
    with g.batch():
        for message in iter_messages(100_000):
            g.append(message)
    g.close()
    dispose_engines()
    print(f"appended in {time.perf_counter() - started:.1f} s")
    with Session(db, "big", model=TestModel(default="ok"), budget=32_000) as session:
        for n in range(calls):
            session.llm(f"go on {n}")
        print(f"{calls} calls; layers {[len(x.covers) for x in session.graph.layers()]}")


def pages(db: str, rounds: int) -> None:
    from starlette.testclient import TestClient

    from openprogram._view import Viewer
    from openprogram._view._app import COOKIE, create_app

    base = Viewer(db, None)
    started = time.perf_counter()
    base.loaded("big")
    print(f"graph load (cold viewer) {time.perf_counter() - started:.2f} s")
    layer = base.layers("big")[0].id
    paths = {
        "timeline": "/s/big",
        "stack by kind": "/s/big?kinds=1",
        "last prompt": "/s/big/prompt",
        "layers": "/s/big/layers",
        "layer": f"/s/big/layer/{layer}",
        "layer page 1,000": f"/s/big/layer/{layer}?page=1000",
        "search": "/s/big/search?q=module_3.py",
        "nodes page 1,000": "/s/big/nodes?page=1000",
    }
    for name, path in paths.items():
        times = []
        response: Any = None
        for _ in range(rounds):
            viewer = Viewer(db, None)
            viewer._loaded = dict(base._loaded)
            app = create_app(viewer, token="t", hosts={"127.0.0.1:8765"})
            with TestClient(app, base_url="http://127.0.0.1:8765") as client:
                client.cookies.set(COOKIE, "t")
                started = time.perf_counter()
                response = client.get(path)
                times.append(time.perf_counter() - started)
            if hasattr(viewer, "totals"):
                viewer.totals.join()
        print(
            f"{name:18} {response.status_code} median {statistics.median(times):6.2f} s"
            f"  max {max(times):6.2f} s  {len(response.text) / 1e3:7.0f} kB",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["build", "pages"])
    parser.add_argument("db")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.what == "build":
        build(args.db, args.calls)
    else:
        pages(args.db, args.rounds)


if __name__ == "__main__":
    main()
