"""Prompts name nodes, finished functions and layers by short handles (issue 34, item 2).

A handle (``n42``, ``fn_42``, ``L3``) comes from the session's own sequence, so the same
program run into two databases sends byte-identical requests (node and session ids are
random ULIDs that differ), an exported and imported session continues with the same
bytes, a handle once shown names the same thing in every later render, and every reader
accepts both a handle and the id.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from _runtime_helpers import lookup, small_policy

import openprogram
from context import Policy
from graph import node_handle, resolve_ref, text_of
from openprogram import ModelResponse, Session
from openprogram.cli import main
from openprogram.testing import FunctionModel, ModelRequest, tool_call

ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
HANDLE = re.compile(r'(read_output|expand_layer|expand_function)\("((?:n|fn_|L)[0-9]+)"')


def _reply(request: ModelRequest) -> ModelResponse:
    """Looks up keys when asked to collect, investigates one key inside a function."""
    users = [i for i, m in enumerate(request.messages) if m["role"] == "user"]
    asked = str(request.messages[users[-1]]["content"])
    done = sum(1 for m in request.messages[users[-1] :] if m["role"] == "tool")
    message: dict[str, Any] = {"role": "assistant", "content": "ok"}
    if asked.startswith("collect") and done < 5:
        call = tool_call("lookup", {"key": f"k_{done + 1}"}, id=f"call_{done + 1}")
        message = {"role": "assistant", "content": f"looking up k_{done + 1}", "tool_calls": [call]}
    elif asked.startswith("investigate") and done == 0:
        key = asked.split()[-1]
        message = {"role": "assistant", "content": f"checking {key}",
                   "tool_calls": [tool_call("lookup", {"key": key}, id=f"inv_{key}")]}  # fmt: skip
    elif asked.startswith("investigate"):
        message = {"role": "assistant", "content": "summary: " + " ".join(map(str, range(80)))}
    return ModelResponse(message)


@openprogram.function
def investigate(key: str) -> str:
    return str(openprogram.llm(f"investigate {key}", tools=[lookup]))


def _session(db: Path | str, tmp_path: Path, session_id: str | None = None) -> Session:
    cascade = ("offload", "budget_reduction", "microcompact", "collapse", "compact", "emergency")
    return Session(
        db,
        session_id=session_id,
        model=FunctionModel(_reply),
        system="You answer from the knowledge base.",
        budget=3_000,
        policy=small_policy(tmp_path, cascade=cascade),
    )


def _run(session: Session, rounds: range) -> list[ModelRequest]:
    with session:
        for n in rounds:
            session.llm(f"collect batch {n}", tools=[lookup])
            investigate(f"k_{n}")
    model: Any = session.model
    return list(model.requests)


def _wire(requests: list[ModelRequest]) -> list[bytes]:
    return [json.dumps([r.messages, r.tools], sort_keys=True).encode() for r in requests]


def test_one_program_into_two_databases_sends_identical_requests(tmp_path: Path) -> None:
    first = _session(tmp_path / "a.db", tmp_path)
    second = _session(f"sqlite:///{tmp_path}/b.db", tmp_path)
    assert first.id != second.id  # random session (and node) ids
    sent = [_wire(_run(s, range(4))) for s in (first, second)]
    assert sent[0] == sent[1]
    text = b"".join(sent[0]).decode()
    assert "output offloaded" in text and 'expand_layer(\\"L1\\")' in text
    assert '"fn_' in text  # a finished function's call, by handle
    assert not ULID.search(text)  # no stored id reaches the model


def test_an_exported_imported_or_copied_session_continues_with_the_same_bytes(
    tmp_path: Path,
) -> None:
    original = _session(tmp_path / "a.db", tmp_path)
    _run(original, range(3))
    export = str(tmp_path / "s.json")
    assert main(["export", original.id, export, "--db", str(tmp_path / "a.db")]) == 0
    assert main(["import", export, "--db", str(tmp_path / "c.db")]) == 0
    copied = original.copy(tmp_path / "d.db")  # new node ids, the same seqs and handles
    copied.close()
    again = [
        _session(tmp_path / "a.db", tmp_path, original.id),
        _session(tmp_path / "c.db", tmp_path, original.id),
        _session(tmp_path / "d.db", tmp_path, copied.id),
    ]
    sent = [_wire(_run(s, range(3, 5))) for s in again]
    assert sent[0] and sent[0] == sent[1] == sent[2]


def test_a_handle_once_shown_names_the_same_thing_in_every_later_render(tmp_path: Path) -> None:
    session = _session(tmp_path / "a.db", tmp_path)
    requests = _run(session, range(5))
    graph = session.graph
    seen: dict[str, str] = {}
    banners: dict[str, str] = {}
    for request in requests:
        for message in request.messages:
            text = text_of(message.get("content"))
            for tool, handle in HANDLE.findall(text):
                if tool == "expand_layer":
                    named = session.engine.layer(handle).id
                    assert banners.setdefault(handle, text) == text  # the same bytes each time
                else:
                    found = resolve_ref(graph.state, handle)
                    assert found is not None, handle
                    named = found
                assert seen.setdefault(handle, named) == named
    assert any(h.startswith("L") for h in seen) and any(h.startswith("n") for h in seen)
    # a layer's banner is stored with it: its handle never moves, later layers get new ones
    handles = [session.engine.layer(info.id).layer.meta["handle"] for info in graph.layers()]
    assert handles == [f"L{k}" for k in range(1, len(handles) + 1)]


def test_every_history_tool_takes_the_handle_and_the_id(tmp_path: Path) -> None:
    session = _session(tmp_path / "a.db", tmp_path)
    _run(session, range(3))
    tools, graph = session.history, session.graph
    big = next(n for n in graph.nodes() if n.kind == "tool" and "k_3" in str(n.payload))
    assert tools.read_output(node_handle(big)) == tools.read_output(big.id)
    assert tools.inspect_node(node_handle(big)) == tools.inspect_node(big.id)
    layer = graph.layers()[0]
    assert tools.expand_layer("L1") == tools.expand_layer(layer.id)
    function = next(n for n in graph.nodes() if n.kind == "function")
    by_call = tools.expand_function(f"fn_{function.seq}")
    assert (
        by_call == tools.expand_function(function.id) == tools.expand_function(f"n{function.seq}")
    )
    first, last = graph.nodes()[1], graph.nodes()[4]
    assert tools.read_history(node_handle(first), node_handle(last)) == tools.read_history(
        first.id, last.id
    )
    assert node_handle(big) in tools.search_history("value of k_3")


def test_a_bad_handle_is_a_one_line_error_naming_it(tmp_path: Path) -> None:
    session = _session(tmp_path / "a.db", tmp_path)
    _run(session, range(1))
    tools = session.history
    with pytest.raises(ValueError, match=r"^no node 'n99999' in this session") as error:
        tools.read_output("n99999")
    assert "\n" not in str(error.value)
    with pytest.raises(Exception, match="L99") as layer_error:
        tools.expand_layer("L99")
    assert "\n" not in str(layer_error.value)


def test_the_cli_takes_handles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "a.db"
    session = _session(db, tmp_path)
    _run(session, range(3))
    node = session.graph.nodes()[3]
    capsys.readouterr()
    assert main(["show", session.id, node_handle(node), "--db", str(db), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["id"] == node.id and shown["handle"] == node_handle(node)
    assert main(["expand", "L1", "--session", session.id, "--db", str(db)]) == 0
    assert "looking up" in capsys.readouterr().out
    assert main(["expand", "L1", "--db", str(db)]) == 2
    assert "give --session" in capsys.readouterr().err
    first = session.engine.layer("L1").id
    assert main(["rollback", session.id, "L1", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("rolled back ") and first in out.splitlines()[0]
    assert main(["rollback", session.id, "L99", "--db", str(db)]) != 0
    assert "'L99'" in capsys.readouterr().err


def test_a_placeholder_names_no_id_and_no_file(tmp_path: Path) -> None:
    session = Session(tmp_path / "a.db", budget=6_000, policy=Policy.claude_code())
    graph = session.graph
    graph.append({"role": "user", "content": "read it"})
    call = {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
    graph.append({"role": "assistant", "content": "", "tool_calls": [call]})
    output = graph.append({"role": "tool", "tool_call_id": "c1", "content": "line\n" * 9_000})
    rendered = session.engine.render()
    shown = next(m["content"] for m in rendered.messages if m["role"] == "tool")
    assert shown.startswith(
        "[output offloaded: 45000 characters, 9000 lines; "
        f'page by page: read_output("n{output.seq}", offset='
    )
    assert output.id not in shown and session.id not in shown and "tool_results" not in shown
    session.close()
