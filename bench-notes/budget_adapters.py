"""The three adapters' largest request by our count and by the wire's (issue 32, item 5).

    PYTHONPATH=$PWD .venv/bin/python bench-notes/budget_adapters.py [--budget 7000]
        [--steps 40] [--history 3] [--no-anchor] [--prose]
        [--frameworks pydantic_ai,langchain,openai_agents]

Runs each framework's own agent (the harness in tests/openprogram/integrations/_wire.py)
against the fake OpenAI-compatible server on 127.0.0.1 and prints one JSON line per
framework: requests, largest request by the engine's count and by the wire JSON's cl100k
count, the largest and mean gap (wire minus ours: above 0 is undercounted), requests over
the budget on the wire, and requests holding the current user request verbatim.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests/openprogram/integrations"), str(ROOT)]
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import _wire  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=int, default=7_000)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--history", type=int, default=3)
    parser.add_argument("--no-anchor", action="store_true")
    parser.add_argument("--frameworks", default=",".join(_wire.RUNNERS))
    parser.add_argument("--prose", action="store_true", help="plain prose tool outputs")
    args = parser.parse_args()
    _wire.PROSE = args.prose
    with tempfile.TemporaryDirectory() as folder:
        for run in _wire.runs(
            Path(folder),
            args.budget,
            args.frameworks.split(","),
            steps=args.steps,
            history=args.history,
            anchor=not args.no_anchor,
        ):
            row = {**run.summary(), "anchor": not args.no_anchor, "prose": args.prose}
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
