"""Proxy sessions are ordinary sessions, live: a compaction made from the command line and
its rollback from the viewer change the next request that goes upstream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from _proxy_checks import holds
from _scripted_upstream import ScriptedUpstream, stop_server
from conftest import Running, start_proxy

from openprogram._view import Viewer  # internal: the data layer behind the viewer's rollback button
from openprogram.cli import main

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
        viewer = Viewer(str(roomy.db), None, allow_write=True)
        (layer,) = [x for x in viewer.layers(session) if x.active]
        viewer.rollback(session, layer.id)
        assert ask()["messages"] == history  # the rollback shows in the very next request
