"""Proxy sessions are ordinary sessions, live: a compaction made from the command line and
its rollback from the viewer (`openprogram view --allow-write`, its button confirmed) change
the next request that goes upstream."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from _proxy_checks import holds
from _scripted_upstream import ScriptedUpstream, stop_server
from conftest import Running, start_proxy

from graph import ConversationGraph, SQLStore
from openprogram.cli import main
from tests.openprogram._browser import served

TOOLS = [{"name": "Read", "description": "read", "input_schema": {"type": "object"}}]


@pytest.fixture
def roomy(upstream: ScriptedUpstream, tmp_path: Path) -> Iterator[Running]:
    run, handle = start_proxy(upstream, tmp_path / "proxy.db", budget=100_000)
    yield run
    stop_server(*handle)  # type: ignore[misc]
    run.proxy.close()


def test_a_compaction_and_its_rollback_in_the_viewer_change_the_next_request(
    roomy: Running,
) -> None:
    history: list[Any] = [{"role": "user", "content": "Port the parser"}]
    for n in range(12):
        history += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"path": f"p{n}.py"}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": f"UNIQUE_LINE_{n} = {n}\n" * 20}]}]  # fmt: skip
    history.append({"role": "user", "content": "Now the lexer."})
    with anthropic.Anthropic(base_url=roomy.anthropic_base, api_key="k", max_retries=0) as claude:

        def ask() -> dict[str, Any]:
            claude.messages.create(
                model="claude-sonnet-4-5", max_tokens=8, tools=TOOLS, messages=history
            )
            return roomy.upstream.bodies()[-1]

        first = ask()
        assert first["messages"] == history  # under budget: sent as it came
        (session,) = [s.id for s in roomy.proxy.store.sessions()]
        assert main(["compact", session, "--db", str(roomy.db)]) == 0
        compacted = ask()
        assert not holds(compacted, "UNIQUE_LINE_0 = 0") and holds(compacted, "Now the lexer.")
        stored = SQLStore(roomy.db, create=False, read_only=True)
        (layer,) = [x.id for x in ConversationGraph(stored, session).layers(active=True)]
        stored.close()
        with served(roomy.db, "--allow-write") as fetch:  # its rollback button, confirmed
            status, page, _ = fetch(f"/s/{session}/layer/{layer}?confirm=1")
            csrf = re.search(r'name="csrf" value="([^"]+)"', page)
            assert status == 200 and csrf is not None
            assert fetch(f"/s/{session}/layer/{layer}/rollback", {"csrf": csrf[1]})[0] == 200
        assert ask()["messages"] == history  # the rollback shows in the very next request
