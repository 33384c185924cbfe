"""How many transactions one steady request of each framework commits, with the adapter over
a session holding 1,000 messages (issue 35, item 4): each mirror sync is one transaction (the
catch-up read, the head move, the new nodes and their index steps), and the Agents SDK's
item list is stored with its sync. Before, a request committed 8 (Pydantic AI, LangChain) and
10 (Agents SDK) times. The render's own (its catch-up read and its commit) are two of them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _overhead import ANSWER, FRAMEWORKS, collect_leftovers, request
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
    collect_leftovers()


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
