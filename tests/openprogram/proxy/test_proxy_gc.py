"""The proxy's first conversation sets the objects the process holds aside from full
garbage collections, once per process (a full collection over a 1,000-item history's
nodes and render state took 100–200 ms inside one request in 30), and
``OPENPROGRAM_GC_FREEZE=0`` turns it off. Each case runs in a fresh process: a freeze is
for the process's life."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[3]
SCRIPT = """
import gc, json, sys
from openprogram.proxy import Proxy, ProxyConfig
proxy = Proxy(ProxyConfig(db=sys.argv[1], budget=4000))
def turn(session):
    body = {"model": "gpt-5", "input": [{"role": "user", "content": "Fix the test"}]}
    headers = {"x-openprogram-session": session}
    prepared = proxy.prepare("responses", headers, json.dumps(body).encode())
    assert prepared.event == "sent", prepared.reason
counts = [gc.get_freeze_count()]
turn("one")
counts.append(gc.get_freeze_count())
turn("two")
counts.append(gc.get_freeze_count())
proxy.close()
print(*counts)
"""


def _frozen_counts(db: Path, freeze: str | None) -> list[int]:
    """The collector's frozen object count before the first request, after it, and after
    a second conversation's first."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("OPENPROGRAM_GC_FREEZE", None)
    if freeze is not None:
        env["OPENPROGRAM_GC_FREEZE"] = freeze
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(db)], capture_output=True, text=True, check=True,
        env=env,
    )  # fmt: skip
    return [int(n) for n in done.stdout.split()]


def test_the_proxys_first_conversation_freezes_the_process_once(tmp_path: Path) -> None:
    before, first, second = _frozen_counts(tmp_path / "p.db", None)
    assert before == 0 and first > 10_000  # the imports and the first session, at least
    assert second <= first  # once: what later conversations make stays collectable (a
    # frozen object freed since leaves the count)


def test_the_proxys_freeze_is_turned_off_by_the_environment(tmp_path: Path) -> None:
    assert _frozen_counts(tmp_path / "p.db", "0") == [0, 0, 0]
