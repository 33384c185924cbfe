"""The history tools on real scenarios: sessions under a small budget where collapse, snip,
offload and compaction acted; every placeholder they wrote names a tool that accepts its
id, the model reads back the right content, and a bad id is a tool error it reads."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _runtime_helpers import long_session, lookup, placeholders, small_policy, texts

import openprogram
from context import Policy
from graph import Node, node_handle, resolve_ref, text_of
from openprogram import HistoryTools, ModelResponse, Session, node_text
from openprogram.testing import FunctionModel, ModelRequest, tool_call

READ_LIMIT: int = inspect.signature(HistoryTools.read_output).parameters["limit"].default
"""The page size read_output cuts at: its public default."""

ARGUMENTS = {
    "read_output": ["id"],
    "read_history": ["first", "last"],
    "expand_layer": ["id"],
    "expand_function": ["id"],
    "inspect_node": ["id"],
    "search_history": ["query"],
}
BUDGET = 2_400
FOUND = re.compile(r"^- (n[0-9]+) \(function look\)", re.M)


def _call(tool: str, args: list[str], n: int) -> dict[str, Any]:
    return tool_call(tool, dict(zip(ARGUMENTS[tool], args, strict=True)), id=f"h{n}")


def _named(requests: list[ModelRequest]) -> set[tuple[str, tuple[str, ...]]]:
    return {(tool, tuple(args)) for r in requests for tool, args in placeholders(r.messages)}


def _accepts(session: Session, tool: str, args: tuple[str, ...]) -> str:
    """What the tool a placeholder names returns for its arguments (raises when refused)."""
    return str(getattr(session.history, tool)(*args))


def _results(session: Session, since: int = 0) -> list[tuple[str, dict[str, Any], str, bool]]:
    """Tool nodes from the ``since``-th on: (name, arguments, result, is_error)."""
    tools = [n for n in session.graph.nodes() if n.kind == "tool"][since:]
    return [
        (
            t.payload.name,  # type: ignore[union-attr]
            json.loads(t.payload.arguments),  # type: ignore[union-attr]
            text_of(t.result.content) if t.result else "",
            bool(t.result and t.result.is_error),
        )
        for t in tools
    ]


def _then(reader: Callable[[ModelRequest], Any]) -> Callable[[ModelRequest], ModelResponse]:
    """A fake's replies without usage, so token estimates stay unanchored (stable tiers)."""

    def reply(request: ModelRequest) -> ModelResponse:
        value = reader(request)
        if isinstance(value, str):
            return ModelResponse({"role": "assistant", "content": value})
        return ModelResponse({"role": "assistant", "content": None, **value})

    return reply


# -- a long session at the top level: collapse, snip, offload ---------------------------------
@pytest.fixture
def long(tmp_path: Path) -> Session:
    return long_session(tmp_path, f"sqlite:///{tmp_path}/op.db", rounds=60, budget=4_000)


def test_every_placeholder_names_an_id_its_tool_accepts(long: Session) -> None:
    assert {"collapse", "snip", "offload"} <= {r.tier for r in long.engine.records()}
    model = long.model
    assert isinstance(model, FunctionModel)
    named = _named(model.requests)
    assert {tool for tool, _ in named} >= {"read_output", "read_history", "expand_layer"}
    for tool, args in named:
        assert all(args), (tool, args)
        text = _accepts(long, tool, args)
        assert text and not text.startswith("Error"), (tool, args)


def test_the_model_reads_back_what_was_put_away(long: Session) -> None:
    state: dict[str, Any] = {}
    earlier = long.model.requests  # type: ignore[union-attr]
    layer = next(a for t, a in sorted(_named(earlier)) if t == "expand_layer")

    def reader(request: ModelRequest) -> Any:
        if "calls" not in state:
            named = sorted({(tool, tuple(args)) for tool, args in placeholders(request.messages)})
            if not any(tool == "expand_layer" for tool, _ in named):  # snipped since
                named.append(("expand_layer", layer))
            tool_id = next(n.id for n in long.graph.nodes() if n.kind == "tool")
            named += [("inspect_node", (tool_id,)), ("search_history", ("value of k_5:",))]
            state["calls"] = named
            return {"tool_calls": [_call(t, list(a), i) for i, (t, a) in enumerate(named)]}
        state["answered"] = request.messages
        return "I have read it all."

    before = len([n for n in long.graph.nodes() if n.kind == "tool"])
    long.model = FunctionModel(_then(reader))
    assert long.llm("Read back what you lost.") == "I have read it all."
    results = _results(long, before)
    assert {name for name, *_ in results} == {
        "read_output",
        "read_history",
        "expand_layer",
        "inspect_node",
        "search_history",
    }
    graph = long.graph

    def node(ref: str) -> Node:  # placeholders name nodes by handle (n42), tests by id too
        found = resolve_ref(graph.state, ref)
        assert found is not None, ref
        return graph.get(found)

    for name, args, text, error in results:
        assert not error, (name, args, text)
        if name == "read_output":
            full = node_text(node(args["id"]))
            if len(full) <= READ_LIMIT:
                assert text == full
            else:
                assert text.startswith(full[:READ_LIMIT])
                handle = node_handle(node(args["id"]))
                assert text.endswith(f'read_output("{handle}", offset={READ_LIMIT})]')
        elif name == "read_history":
            first = node(args["first"])
            assert text.startswith(f"[{first.role}] {node_text(first)}"[:200])
            assert "[assistant calls lookup]" in text
        elif name == "expand_layer":
            covered = [graph.get(n) for n in long.engine.layer(args["id"]).covers]
            assert text.startswith(f"[assistant] {node_text(covered[0])}")
        elif name == "inspect_node":
            header = json.loads(text.split("\n", 1)[0])
            assert header["node"] == node_handle(node(args["id"])) and header["kind"] == "tool"
            assert header["tool"] == "lookup" and header["status"] == "done"
        else:
            k5 = next(n for n in graph.nodes() if node_text(n).endswith("end of k_5"))
            assert text.startswith(f"- {node_handle(k5)} (tool lookup): …value of k_5: w0 w1")
            assert len(text.splitlines()) == 1
    # what the model read is in its next prompt (tool results after its calls)
    sent = state["answered"]
    answers = [m for m in sent if m.get("role") == "tool" and m["tool_call_id"].startswith("h")]
    assert len(answers) == len(results)


def test_bad_ids_are_errors_the_model_reads(long: Session) -> None:
    dialogue = next(n.id for n in long.graph.nodes() if n.role == "assistant")
    later = [n.id for n in long.graph.nodes() if n.role == "assistant"][-1]
    calls = [
        tool_call("read_output", {"id": "nope"}),
        tool_call("read_history", {"first": later, "last": dialogue}),
        tool_call("read_history", {"first": "nope", "last": dialogue}),
        tool_call("expand_layer", {"id": "nope"}),
        tool_call("expand_layer", {"id": dialogue}),
        tool_call("expand_function", {"id": dialogue}),
        tool_call("expand_function", {"id": "nope"}),
        tool_call("inspect_node", {"id": "../etc/passwd"}),
        tool_call("search_history", {"query": "   "}),
        tool_call("read_history", {"first": dialogue}),
    ]
    replies = iter([{"tool_calls": calls}, "sorry"])
    long.model = FunctionModel(_then(lambda request: next(replies)))
    before = len([n for n in long.graph.nodes() if n.kind == "tool"])
    assert long.llm("Try these.") == "sorry"
    results = _results(long, before)
    assert [error for *_, error in results] == [True] * len(calls)
    messages = [text for _, _, text, _ in results]
    assert all(m.startswith("Error: ") for m in messages)
    assert messages[0] == "Error: no node 'nope' in this session; search_history finds ids"
    assert "does not come before" in messages[1]
    assert "no layer 'nope'" in messages[3] and f"no layer '{dialogue}'" in messages[4]
    assert messages[5] == f"Error: node {dialogue} is a dialogue node, not a function"
    assert messages[8] == "Error: the query is empty"
    assert "last: Field required" in messages[9]


CONTINUE = re.compile(r"\n\[\.\.\. \d+ more characters; \w+\(.*offset=(\d+)\)\]$")


def _read_all(read: Callable[..., str], *args: Any) -> str:
    """Every piece of a long read, following the offsets each piece ends with."""
    text, offset = "", 0
    while True:
        piece = read(*args, offset=offset)
        found = CONTINUE.search(piece)
        if found is None:
            return text + piece
        text += piece[: found.start()]
        assert int(found.group(1)) == len(text)
        offset = len(text)


def test_long_reads_come_in_pieces(long: Session) -> None:
    big = next(n for n in long.graph.nodes() if len(node_text(n)) > READ_LIMIT)
    full = node_text(big)
    first = long.history.read_output(big.id)
    marker = f'\n[... {len(full) - READ_LIMIT} more characters; read_output("{node_handle(big)}", '
    assert first == full[:READ_LIMIT] + marker + f"offset={READ_LIMIT})]"
    second = long.history.read_output(big.id, offset=READ_LIMIT)
    assert second.startswith(full[READ_LIMIT : 2 * READ_LIMIT])
    assert long.history.read_output(big.id, offset=5, limit=10) == full[5:15] + (
        f'\n[... {len(full) - 15} more characters; read_output("{node_handle(big)}", offset=15)]'
    )
    assert _read_all(long.history.read_output, big.id) == full
    # a range of rounds longer than one read continues where it stopped
    nodes = [n for n in long.graph.nodes() if n.role == "assistant"]
    assistants = [n.id for n in nodes]
    head = long.history.read_history(assistants[0], assistants[10])
    first_handle, last_handle = node_handle(nodes[0]), node_handle(nodes[10])
    assert head.endswith(f'read_history("{first_handle}", "{last_handle}", offset={READ_LIMIT})]')
    assert long.history.read_history(first_handle, last_handle) == head
    whole = _read_all(long.history.read_history, assistants[0], assistants[10])
    assert len(whole) > 2 * READ_LIMIT
    assert whole.startswith("[assistant] step 1: looking up k_1\n")
    assert whole.endswith("end of k_11")
    assert all(f"end of k_{n}\n" in whole for n in range(1, 11))
    # and so do a layer's and a function's
    for info in long.engine.layers():
        covered = _read_all(long.history.expand_layer, info.id)
        assert covered.startswith("[assistant] step ")


# -- compactions: finished functions named by expand_function ------------------------------------
def _investigator(request: ModelRequest) -> Any:
    asked = next(m["content"] for m in reversed(request.messages) if m["role"] == "user")
    if asked.startswith("investigate"):
        key = asked.split()[-1]
        if request.messages[-1]["role"] == "user":
            return {"content": f"checking {key}", "tool_calls": [tool_call("lookup", {"key": key})]}
        return f"summary of {key}: " + " ".join(f"s{i}" for i in range(100))
    return "ok"


@openprogram.function
def investigate(key: str) -> str:
    return str(openprogram.llm(f"investigate {key}", tools=[lookup]))


def test_compaction_placeholders_name_functions_and_layers(tmp_path: Path) -> None:
    cascade = ("offload", "budget_reduction", "microcompact", "compact", "emergency")
    model = FunctionModel(_then(_investigator))
    session = Session(
        tmp_path / "op.db",
        model=model,
        system="sys",
        budget=3_000,
        policy=small_policy(tmp_path, cascade=cascade),
    )
    with session:
        session.llm("the task")
        for n in range(16):
            investigate(f"k_{n}")
            session.llm(f"what next after {n}?")
    assert "compact" in {r.tier for r in session.engine.records()}
    named = _named(model.requests)
    assert {tool for tool, _ in named} >= {"expand_function", "expand_layer", "read_output"}
    for tool, args in named:
        if args == ("<id>",):  # the compaction's hint of how to read any node
            assert tool == "inspect_node"
            continue
        text = _accepts(session, tool, args)
        assert not text.startswith("Error"), (tool, args)
        if tool == "expand_function":
            text = _read_all(session.history.expand_function, args[0])
            node = session.graph.get(args[0])
            key = node.payload.input["key"]  # type: ignore[union-attr]
            assert text.startswith(f"[user] investigate {key}\n[assistant] checking {key}")
            assert f"[assistant] summary of {key}: s0 s1" in text


# -- a running function's subtree survives; finished ones are put away ------------------------
def note(key: str) -> str:
    """Read a short note."""
    return f"note {key}: " + " ".join(f"n{i}" for i in range(20))


def test_a_running_function_keeps_its_subtree_and_reads_an_old_one_back(tmp_path: Path) -> None:
    steps = 10
    state: dict[str, Any] = {}

    def reader(request: ModelRequest) -> Any:
        asked = next(m["content"] for m in reversed(request.messages) if m["role"] == "user")
        if asked.startswith("investigate"):
            key = asked.split()[-1]
            if request.messages[-1]["role"] == "user":
                return {
                    "content": f"checking {key}",
                    "tool_calls": [tool_call("note", {"key": key})],
                }
            return f"summary of {key}: " + " ".join(f"s{i}" for i in range(120))
        if asked != "work on the current task":
            return "noted"
        last = request.messages[-1]
        if last.get("tool_call_id") == "find":  # search_history answered: open the function
            state["function"] = FOUND.findall(last["content"])[0]
            call = tool_call("expand_function", {"id": state["function"]}, id="open")
            return {"tool_calls": [call]}
        if last.get("tool_call_id") == "open":
            state["read"] = last["content"]
        done = state.setdefault("done", 0)
        if done == 3 and "find" not in state:
            state["find"] = True
            query = {"query": "summary of k_1:", "limit": 2}
            return {"tool_calls": [tool_call("search_history", query, id="find")]}
        if done < steps:
            state["done"] = done + 1
            call = tool_call("note", {"key": f"c_{done + 1}"})
            return {"content": f"current step {done + 1}", "tool_calls": [call]}
        return "current done"

    model = FunctionModel(_then(reader))
    session = Session(
        tmp_path / "op.db", model=model, system="sys", budget=BUDGET, policy=small_policy(tmp_path)
    )

    @openprogram.function
    def look(key: str) -> str:
        return str(openprogram.llm(f"investigate {key}", tools=[note]))

    @openprogram.function
    def current() -> str:
        return str(openprogram.llm("work on the current task", tools=[note]))

    with session:
        session.llm("the task")
        for n in range(12):
            look(f"k_{n}")
        started = len(model.requests)
        assert current() == "current done"

    tiers = {r.tier for r in session.engine.records()}
    assert tiers & {"snip", "compact"} and "emergency" not in tiers
    running = model.requests[started:]
    finished = [n for n in session.graph.nodes() if n.kind == "function"][:-1]
    for request in running:
        sent = texts(request.messages)
        # every step of the running function so far is there, in order
        mine = [t.split(" note(")[0] for t in sent if t.startswith("current step")]
        assert mine == [f"current step {n + 1}" for n in range(len(mine))]
        assert "work on the current task" in sent
        # older finished functions were put away (at most the newest shows as a call)
        calls = [t for t in sent if t.startswith("look(")]
        assert len(calls) < len(finished)
    assert len([t for t in texts(running[-1].messages) if t.startswith("current step")]) == steps

    # the model found a finished function and opened it
    opened = session.graph.get(state["function"])
    assert opened.kind == "function" and opened.status == "completed"
    key = opened.payload.input["key"]  # type: ignore[union-attr]
    assert state["read"].startswith(f"[user] investigate {key}\n[assistant] checking {key}")
    assert "[tool result call_" in state["read"] and f"summary of {key}" in state["read"]
    tool = next(
        n for n in session.graph.nodes() if n.kind == "tool" and n.payload.call_id == "open"
    )  # type: ignore[union-attr]
    assert tool.result is not None and tool.result.content == state["read"]
    assert state["read"] == session.history.expand_function(opened.id)
    # the prompt right after the call holds what it read, and so do the later ones
    asked = next(i for i, r in enumerate(running) if r.messages[-1].get("tool_call_id") == "open")
    for request in running[asked:]:
        assert any(m.get("content") == state["read"] for m in request.messages)


def test_rounds_emergency_elides_can_be_read_back(tmp_path: Path) -> None:
    def page(key: str) -> str:
        """Read a page."""
        return f"page {key}: " + " ".join(f"p{i}" for i in range(150))

    def reader(request: ModelRequest) -> Any:
        step = len(model.requests)
        if step > 12:
            return "finished"
        call = tool_call("page", {"key": f"r_{step}"})
        return {"content": f"running step {step}", "tool_calls": [call]}

    model = FunctionModel(_then(reader))
    session = Session(tmp_path / "op.db", model=model, budget=1_500, policy=small_policy(tmp_path))

    @openprogram.function
    def long_task() -> str:
        return str(openprogram.llm("a long task", tools=[page], max_steps=30))

    with session:
        long_task()
    assert "emergency" in {r.tier for r in session.engine.records()}
    stubs = [
        m["content"]
        for r in model.requests
        for m in r.messages
        if str(m.get("content")).startswith("[earlier step elided")
    ]
    assert stubs
    for stub in stubs:
        ((tool, (first, last)),) = placeholders([{"content": stub}])
        assert tool == "read_history"
        text = session.history.read_history(first, last)
        step = session.graph.get(first)
        assert text.startswith(f"[assistant] {node_text(step)}\n[assistant calls page]")
        assert "[tool result call_" in text and text.endswith(" p149")


# -- a page read back is shown as read, and the placeholder says how to read on ------------------
PAGE_BY_PAGE = re.compile(r'page by page: read_output\("(n[0-9]+)", offset=(\d+)\)')


def dump() -> str:
    """Print the whole build log."""
    return "\n".join(f"log line {i}: " + "x" * 40 for i in range(600))


def test_a_read_output_page_is_never_offloaded_or_reduced_again(tmp_path: Path) -> None:
    """The placeholder names the offset its preview stops at; the page that call returns is
    shown whole, though it is over the offload and reduction sizes (before, it said
    ``returns all`` and the page was offloaded again: a model looped on it)."""
    seen: list[ModelRequest] = []

    def reply(request: ModelRequest) -> Any:
        seen.append(request)
        last = request.messages[-1]
        if len(seen) == 1:
            return {"content": None, "tool_calls": [tool_call("dump", {}, id="d1")]}
        if len(seen) == 2:
            found = PAGE_BY_PAGE.search(text_of(last["content"]))
            assert found is not None, last["content"][:300]
            args = {"id": found.group(1), "offset": int(found.group(2))}
            return {"content": None, "tool_calls": [tool_call("read_output", args, id="r1")]}
        return "done"

    policy = Policy.claude_code(
        None, always=("offload", "budget_reduction"), offload_chars=5_000, offload_share=None
    )
    session = Session(
        f"sqlite:///{tmp_path}/op.db", model=FunctionModel(reply), budget=20_000, policy=policy
    )
    assert session.llm("Read the build log.", tools=[dump]) == "done"
    log = dump()
    offset = int(PAGE_BY_PAGE.findall(text_of(seen[1].messages[-1]["content"]))[0][1])
    page = text_of(seen[2].messages[-1]["content"])
    assert page.startswith(log[offset : offset + READ_LIMIT])
    assert "offloaded" not in page and "elided" not in page
