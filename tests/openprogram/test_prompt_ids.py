"""Every id a prompt shows opens (issue 13, item 5).

Every node, function, layer and offload id in a rendered prompt — bare, as a finished
function's ``fn_<id>`` tool-call id, in placeholders, removal notes and summaries, or as an
offload file's path — is accepted by every history tool it is offered to, and so is every
id in what those tools return. The prompts come from a runtime run (the research agent,
whose prompts the model really received) and from the shared traces replayed under small
budgets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from context import Policy, sent_prompt
from graph import MemoryStore, SQLStore, node_handle, resolve_ref, seeded_ids
from openprogram import HISTORY_TOOLS, Session
from openprogram.cli import main
from openprogram.importers import import_trace
from openprogram.testing import TestModel

TRACES = Path("/work/shared/traces")
SHARED = sorted(
    p
    for folder in ("claude-code", "mini-swe-agent", "swe-agent")
    for p in (TRACES / folder).glob("*")
    if p.suffix in (".jsonl", ".json", ".traj")
)
ULID = r"[0-9A-HJKMNP-TV-Z]{26}"
ID = re.compile(rf"(?<![\w/])(?:(?:fn_)?{ULID}|(?:fn_|n|L)[1-9][0-9]*)(?![\w])")
"""An id, or a handle as prompts name nodes (``n42``), functions' calls (``fn_42``) and
layers (``L3``) since issue 34."""
PATH = re.compile(rf"[\w./-]*tool_results/[\w.-]+/{ULID}\.txt")
KEYWORD = re.compile(r"\b\w+=")
CALL = re.compile(rf"\b({'|'.join(HISTORY_TOOLS)})\(([^()]*)\)")


def prompt_text(messages: list[dict[str, Any]]) -> str:
    """Everything a model reads in a prompt: contents, call ids, arguments, result ids."""
    return json.dumps(messages, ensure_ascii=False).replace('\\"', '"')


def mentions(text: str) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """The history-tool calls a prompt or a tool result spells out, with their arguments."""
    for name, raw in CALL.findall(text):
        try:
            args = json.loads("[" + KEYWORD.sub("", raw) + "]")
        except json.JSONDecodeError:
            continue  # a template ("offset={offset}") or prose, not a call to make
        yield name, tuple(args)


def offered(session: Session, text: str) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """Each id in ``text`` with each history tool that takes an id of its kind."""
    graph = session.graph
    layers = {info.id for info in graph.layers()}
    for found in set(ID.findall(text)):
        bare = resolve_ref(graph.state, found) or found.removeprefix("fn_")
        if bare in layers:
            yield "expand_layer", (found,)
        elif bare in graph:
            yield "inspect_node", (found,)
            yield "read_output", (found,)
            if graph.get(bare).kind == "function":
                yield "expand_function", (found,)
        elif found.startswith("fn_"):
            yield "expand_function", (found,)  # a function id must open even if unknown here
    for path in set(PATH.findall(text)):
        yield "read_output", (path,)


def check_prompt(
    session: Session, messages: list[dict[str, Any]]
) -> set[tuple[str, tuple[Any, ...]]]:
    """Call every history tool the prompt offers, then every one its results offer; returns
    the calls made. A tool error fails the test with the call and its answer."""
    tools = session.history
    text = prompt_text(messages)
    calls = set(mentions(text)) | set(offered(session, text))
    seen: set[tuple[str, tuple[Any, ...]]] = set()
    for depth in range(2):
        answers = []
        for name, args in sorted(calls - seen, key=str):
            seen.add((name, args))
            try:
                answer = getattr(tools, name)(*args)
            except Exception as error:  # the loop turns these into tool errors
                pytest.fail(f"{name}{args} failed: {error}")
            assert isinstance(answer, str)
            answers.append(answer)
        if depth == 0:
            joined = "\n".join(answers)
            calls = set(mentions(joined)) | set(offered(session, joined))
    return seen


def test_the_research_agent_s_prompts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, state = str(tmp_path / "demo.db"), str(tmp_path / "state")
    assert main(["--db", db, "--state-dir", state, "demo"]) == 0
    capsys.readouterr()
    (made_by_demo,) = [info.id for info in SQLStore(db, create=False).sessions()]
    session = Session(db, made_by_demo, model=TestModel(), state_dir=state)
    storage = session.engine.storage
    assert storage is not None
    sent = [
        sent_prompt(storage, receipt) for receipt in storage.receipts()
    ]  # as the model got them
    assert len(sent) > 50
    made = set().union(*(check_prompt(session, prompt.messages) for prompt in sent if prompt))
    assert None not in sent
    assert len(made) > 100
    forms = {(name, str(args[0])[:3]) for name, args in made}
    assert ("expand_function", "fn_") in forms  # a finished function's tool-call id
    by_handle = {(name, str(args[0])[0]) for name, args in made}  # handles (issue 34)
    assert {("expand_layer", "L"), ("read_output", "n")} <= by_handle
    assert {name for name, _ in made} >= {"expand_layer", "read_output", "inspect_node"}


@pytest.mark.skipif(not SHARED, reason=f"no shared traces at {TRACES}")
@settings(
    max_examples=12,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    path=st.sampled_from(SHARED),
    budget=st.sampled_from([2_000, 4_000, 8_000]),
    where=st.floats(0.3, 1.0),
)
def test_replayed_traces_prompts(path: Path, budget: int, where: float, tmp_path: Path) -> None:
    store = MemoryStore()
    session = Session(store, policy=Policy.claude_code(), budget=budget)
    with seeded_ids(f"ids:{path.name}"):
        import_trace(path, session.graph)
        assistants = [n.id for n in session.graph.nodes() if n.role == "assistant"]
        assert assistants
        last = assistants[max(0, int(len(assistants) * where) - 1)]
        for head in [*assistants[: assistants.index(last) + 1 : 10], last]:
            rendered = session.engine.render(head=head)
    made = check_prompt(session, rendered.messages)  # each call it makes must succeed
    event(f"history-tool calls offered: {'some' if made else 'none (the prompt fit)'}")


def test_read_output_states_its_cap_and_never_points_at_its_own_result() -> None:
    session = Session(":memory:", budget=50_000)
    graph = session.graph
    graph.append({"role": "user", "content": "read it"})
    big = "".join(f"line {i:05d}\n" for i in range(3_000))
    call = {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
    graph.append({"role": "assistant", "content": "", "tool_calls": [call]})
    output = graph.append({"role": "tool", "tool_call_id": "c1", "content": big})
    source = output  # the tool node: a result is an event on it
    answer = session.history.read_output(source.id, limit=200_000)
    assert answer.startswith("[one read returns at most 8,000 characters]")
    arguments = json.dumps({"id": source.id, "limit": 200_000})
    again = {"id": "c2", "type": "function",
             "function": {"name": "read_output", "arguments": arguments}}  # fmt: skip
    graph.append({"role": "assistant", "content": "", "tool_calls": [again]})
    result = graph.append({"role": "tool", "tool_call_id": "c2", "content": answer})
    read_id = result.id
    reread = session.history.read_output(read_id, offset=8_000)
    assert "line 00728" in reread  # 11 characters a line: the source, from offset 8,000
    assert read_id not in reread.split("\n", 1)[1]  # its notes name the source, not itself
    assert f'read_output("{node_handle(source)}", offset=16000)' in reread
    session.close()
