"""How many transactions one steady request of each framework commits, with the adapter over
a session holding 1,000 messages (issue 35, item 4): each mirror sync is one transaction (the
catch-up read, the head move, the new nodes and their index steps), and the Agents SDK's
item list is stored with its sync. Before, a request committed 8 (Pydantic AI, LangChain) and
10 (Agents SDK) times. The render's own (its catch-up read and its commit) are two of them."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _overhead import ANSWER, FRAMEWORKS, request
from sqlalchemy import event
from sqlalchemy.engine import Engine

MODULES = {"pydantic_ai": "pydantic_ai", "langchain": "langchain", "openai_agents": "agents"}
pytestmark = pytest.mark.filterwarnings("ignore:asynchronous generator:ResourceWarning")
MOST = {"pydantic_ai": 4, "langchain": 4, "openai_agents": 5}
"""The render's sync and the answer's (or the SDK's input and answer writes), plus the
render's two."""


@pytest.fixture
def commits() -> Iterator[list[int]]:
    counted = [0]

    def count(_connection: Any) -> None:
        counted[0] += 1

    event.listen(Engine, "commit", count)
    yield counted
    event.remove(Engine, "commit", count)
    gc.collect()  # Pydantic AI's run iterators, collected here where their warning is ignored
    try:  # the loop run_sync kept for this thread: its generators closed while it runs
        loop = asyncio.get_event_loop()
    except RuntimeError:
        return
    if not loop.is_running() and not loop.is_closed():
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    asyncio.set_event_loop(None)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_steady_request_commits_a_few_times(
    tmp_path: Path, framework: str, commits: list[int]
) -> None:
    pytest.importorskip(MODULES[framework])
    run = request(framework, True, tmp_path / "op.db")
    assert run() == ANSWER  # the first request stores the history
    assert run() == ANSWER
    commits[0] = 0
    assert run() == ANSWER
    assert 0 < commits[0] <= MOST[framework]
