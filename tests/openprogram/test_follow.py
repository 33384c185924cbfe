"""Following a growing transcript: new records only, idempotent, through a torn last line,
a rewrite and a rotation; over MCP, the server's sessions grow while it runs."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _scrub_helpers import SECRET, scrub_elsewhere
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from graph import ConversationGraph, SQLStore

# internal: `openprogram follow`'s follower driven step by step, its parsers counted
from openprogram._traces import _follow
from openprogram._traces._follow import ABANDONED, TraceFollower
from openprogram.importers import IMPORTED_KEY, _growing, import_trace

ROOT = Path(__file__).resolve().parents[2]
T0 = "2026-01-01T10:00:00.000Z"


def _record(kind: str, uuid: str, parent: str | None, message: dict[str, Any]) -> dict[str, Any]:
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "sessionId": "follow-1",
        "type": kind,
        "uuid": uuid,
        "timestamp": T0,
        "message": message,
    }


def _turns(first: int, last: int) -> list[dict[str, Any]]:
    """Rounds ``first``..``last``: a user prompt, an assistant tool call, its result."""
    records = []
    for n in range(first, last + 1):
        parent = f"r{n - 1}" if n > 1 else None
        records.append(_record("user", f"u{n}", parent, {"role": "user", "content": f"step {n}"}))
        call = {
            "type": "tool_use",
            "id": f"t{n}",
            "name": "Bash",
            "input": {"command": f"make t{n}"},
        }
        assistant = {
            "model": "claude-test",
            "id": f"m{n}",
            "type": "message",
            "role": "assistant",
            "content": [call],
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }
        records.append(_record("assistant", f"a{n}", f"u{n}", assistant))
        result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": f"ok {n}"}
        records.append(_record("user", f"r{n}", f"a{n}", {"role": "user", "content": [result]}))
    return records


def _write(path: Path, records: list[dict[str, Any]], mode: str = "w") -> None:
    with path.open(mode) as out:
        out.writelines(json.dumps(r) + "\n" for r in records)


def _nodes_of(path: Path) -> int:
    graph = ConversationGraph.memory()
    import_trace(path, graph)
    return len(graph)


def test_polls_import_only_what_is_new(tmp_path: Path) -> None:
    trace = tmp_path / "session.jsonl"
    _write(trace, _turns(1, 3))
    store = SQLStore(tmp_path / "f.db")
    errors: list[str] = []
    follower = TraceFollower(store, trace, on_error=errors.append, settle=0)
    first = follower.poll()
    assert first is not None and not first.already_imported
    session = follower.session
    assert session is not None
    assert follower.poll() is None  # unchanged: not even parsed
    _write(trace, _turns(4, 5), "a")
    with trace.open("a") as out:
        out.write('{"parentUuid": "r5", "type": "user", "uuid": "u6", "mess')  # torn
    torn = follower.poll()  # the whole lines before a torn one are imported; it waits
    assert torn is not None and torn.held > 0 and follower.error is None and not errors
    assert len(ConversationGraph(store, session)) == _nodes_of_prefix(tmp_path, 5)
    _write(trace, _turns(1, 6))  # the agent finishes its line (and writes another round)
    grown = follower.poll()
    assert grown is not None and grown.held > 0 and follower.error is None
    assert len(ConversationGraph(store, session)) == _nodes_of(trace)
    # a rotation: the file renamed away and a new one written with the same beginning
    trace.rename(tmp_path / "session.jsonl.1")
    assert follower.poll() is None  # between the rename and the new file
    _write(trace, _turns(1, 8))
    follower.poll()
    assert follower.session == session
    assert len(ConversationGraph(store, session)) == _nodes_of(trace)
    assert [info.id for info in store.sessions()] == [session]
    # a file that now holds another conversation goes to a session of its own
    _write(trace, [_record("user", "x1", None, {"role": "user", "content": "another task"})])
    follower.poll()
    assert follower.session != session and len(store.sessions()) == 2


def test_the_mcp_server_follows_a_growing_transcript(tmp_path: Path) -> None:
    trace = tmp_path / "session.jsonl"
    _write(trace, _turns(1, 2))
    db = tmp_path / "follow.db"
    code = "import sys; from openprogram.cli import run; sys.argv[0] = 'openprogram'; run()"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", code, "mcp", "--db", str(db), "--follow", str(trace), "--settle", "0"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=str(tmp_path),
    )

    async def sessions(client: Client) -> list[dict[str, Any]]:
        result = await client.call_tool("list_sessions", {})
        return list(json.loads(result.content[0].text))  # type: ignore[union-attr]

    async def body() -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
        async with Client(params, raise_exceptions=True) as client:
            before = await sessions(client)
            _write(trace, _turns(3, 6), "a")
            expected = _nodes_of(trace)
            deadline = time.monotonic() + 60
            after = before
            while time.monotonic() < deadline:
                after = await sessions(client)
                if after and after[0]["nodes"] >= expected:
                    break
                await asyncio.sleep(0.2)
            found = await client.call_tool(
                "search_history", {"query": "step 6", "session": after[0]["id"]}
            )
            return before, after, found.content[0].text  # type: ignore[union-attr]

    before, after, found = asyncio.run(body())
    assert len(before) == 1 and before[0]["nodes"] == _nodes_of_prefix(tmp_path, 2)
    assert [s["id"] for s in after] == [before[0]["id"]]
    assert after[0]["nodes"] == _nodes_of(trace)
    assert "step 6" in found


def _nodes_of_prefix(tmp_path: Path, rounds: int) -> int:
    prefix = tmp_path / "prefix.jsonl"
    _write(prefix, _turns(1, rounds))
    return _nodes_of(prefix)


def _lines(records: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def _content(graph: ConversationGraph) -> tuple[Any, ...]:
    """What an import put in a session, without the ids it made up."""
    return graph.to_openai(), [(n.kind, n.at, n.meta) for n in graph.nodes()]


def _one_shot(path: Path) -> tuple[Any, ...]:
    graph = ConversationGraph.memory()
    import_trace(path, graph)
    return _content(graph)


def _is_json(text: bytes) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


class _Counting:
    """Counts the lines the growing reader decodes and the whole-file parses."""

    def __init__(self, monkeypatch: Any) -> None:
        self.lines = 0
        self.whole = 0
        decode, parse = _growing.decode_lines, _follow.parse_trace

        def decode_lines(lines: Any, *args: Any) -> Any:
            lines = list(lines)
            self.lines += len(lines)
            return decode(lines, *args)

        def parse_trace(*args: Any, **kwargs: Any) -> Any:
            self.whole += 1
            return parse(*args, **kwargs)

        monkeypatch.setattr(_growing, "decode_lines", decode_lines)
        monkeypatch.setattr(_follow, "parse_trace", parse_trace)


def test_a_trace_appended_in_steps_is_imported_as_one_shot(
    tmp_path: Path, monkeypatch: Any
) -> None:
    data = _lines(_turns(1, 7))
    ends = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    # steps of one line, several lines, and cuts inside a line (a torn last line waits)
    cuts = [ends[0], ends[1], ends[4], ends[4] + 17, ends[5] - 1, ends[9], ends[12] + 3, len(data)]
    trace = tmp_path / "session.jsonl"
    trace.write_bytes(b"")
    counting = _Counting(monkeypatch)
    store = SQLStore(tmp_path / "f.db")
    notices: list[str] = []
    clock = _Clock()
    follower = TraceFollower(
        store, trace, format="claude-code", on_notice=notices.append, clock=clock
    )
    follower.poll()
    written = lines = 0
    for cut in cuts:
        with trace.open("ab") as out:
            out.write(data[written:cut])
        written = cut
        decoded = counting.lines
        follower.poll()
        clock.now += follower.settle  # quiet: what the parser holds is imported too
        follower.poll()
        assert follower.error is None
        prefix = data[:cut]
        complete = prefix[: prefix.rfind(b"\n") + 1]
        whole = _is_json(prefix[len(complete) :])  # an unfinished last line, but whole JSON
        # a step decodes only the lines it completed (and a whole unfinished last one)
        assert counting.lines - decoded == complete.count(b"\n") - lines + whole
        lines = complete.count(b"\n")
        assert follower.session is not None
        as_now = tmp_path / "prefix.jsonl"  # the file now, without a torn last line
        as_now.write_bytes(prefix if whole else complete)
        assert _content(ConversationGraph(store, follower.session)) == _one_shot(as_now)
    assert counting.whole == 0 and not notices
    assert _content(ConversationGraph(store, follower.session)) == _one_shot(trace)
    assert [info.id for info in store.sessions()] == [follower.session]


def test_a_poll_with_no_change_reads_nothing(tmp_path: Path, monkeypatch: Any) -> None:
    trace = tmp_path / "session.jsonl"
    _write(trace, _turns(1, 2))
    counting = _Counting(monkeypatch)
    follower = TraceFollower(SQLStore(tmp_path / "f.db"), trace, settle=0)
    assert follower.poll() is not None and counting.lines == 6
    for _ in range(3):
        assert follower.poll() is None
    assert counting.lines == 6 and counting.whole == 0
    _write(trace, _turns(3, 3), "a")
    stats = follower.poll()
    assert stats is not None and stats.held == 6 and stats.messages == 3
    assert counting.lines == 9  # the three appended lines, not the whole file again


def test_a_whole_json_trace_is_parsed_again_only_when_it_changed(
    tmp_path: Path, monkeypatch: Any
) -> None:
    trace = tmp_path / "run.traj.json"
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Fix it"},
    ]
    document = {"messages": messages, "trajectory_format": "mini-swe-agent-1"}
    trace.write_text(json.dumps(document))
    counting = _Counting(monkeypatch)
    store = SQLStore(tmp_path / "f.db")
    follower = TraceFollower(store, trace)
    assert follower.poll() is not None and counting.whole == 1
    assert follower.poll() is None and counting.whole == 1
    messages.append({"role": "assistant", "content": "THOUGHT: done.\n```bash\nls\n```"})
    trace.write_text(json.dumps(document))
    stats = follower.poll()
    assert stats is not None and stats.held == 2 and counting.whole == 2
    assert counting.lines == 0
    assert follower.session is not None
    graph = ConversationGraph.memory()
    import_trace(trace, graph)  # (no timestamps in this trace: its nodes are stamped now)
    assert ConversationGraph(store, follower.session).to_openai() == graph.to_openai()


def test_a_truncated_or_replaced_trace_is_read_again_never_doubled(tmp_path: Path) -> None:
    trace = tmp_path / "session.jsonl"
    _write(trace, _turns(1, 4))
    store = SQLStore(tmp_path / "f.db")
    notices: list[str] = []
    follower = TraceFollower(store, trace, on_notice=notices.append, settle=0)
    follower.poll()
    session = follower.session
    assert session is not None
    held = _content(ConversationGraph(store, session))
    # truncated to its first rounds: the session holds them already, nothing is added
    _write(trace, _turns(1, 2))
    stats = follower.poll()
    assert stats is not None and stats.already_imported and stats.messages == 0
    assert notices and "shrank" in notices[-1] and follower.notice == notices[-1]
    assert _content(ConversationGraph(store, session)) == held
    # grown again past what the session holds: only the new rounds are appended
    _write(trace, _turns(3, 6), "a")
    follower.poll()
    assert follower.session == session
    assert _content(ConversationGraph(store, session)) == _one_shot(trace)
    # replaced by a new file (another inode) with the same beginning and more
    replacement = tmp_path / "new.jsonl"
    _write(replacement, _turns(1, 7))
    os.replace(replacement, trace)
    follower.poll()
    assert "another file" in notices[-1] and follower.session == session
    assert _content(ConversationGraph(store, session)) == _one_shot(trace)
    # rewritten in place with other content of the same length: read again, and a
    # conversation that no longer begins with the session's records gets a session of its own
    before = len(ConversationGraph(store, session))
    trace.write_bytes(trace.read_bytes().replace(b"step 7", b"step 9"))
    follower.poll()
    assert "rewritten" in notices[-2] and "another conversation" in notices[-1]
    assert follower.session != session
    assert len(ConversationGraph(store, session)) == before  # nothing lost, nothing doubled
    assert _content(ConversationGraph(store, follower.session)) == _one_shot(trace)
    assert follower.error is None


def test_a_response_written_a_block_at_a_time_is_imported_once_the_file_is_quiet(
    tmp_path: Path,
) -> None:
    """Claude Code writes one response as several records (a text block, then a call). A
    poll between them imports what comes before the response, not the response: a stored
    node never changes, so it waits for the file to be quiet for ``settle`` seconds."""
    trace = tmp_path / "session.jsonl"
    second = _first_block_of_a_response(trace)
    store = SQLStore(tmp_path / "f.db")
    notices: list[str] = []
    clock = _Clock()
    follower = TraceFollower(store, trace, on_notice=notices.append, settle=5, clock=clock)
    assert follower.poll() is not None
    session = follower.session
    assert session is not None
    graph = ConversationGraph(store, session)
    assert graph.to_openai() == [{"role": "user", "content": "go"}]  # the response waits
    clock.now += 4
    assert follower.poll() is None  # not quiet long enough
    _write(trace, [second], "a")  # its next block: the response is whole now
    assert follower.poll() is not None
    clock.now += 4.9
    assert follower.poll() is None and len(ConversationGraph(store, session)) == 1
    clock.now += 0.1
    stats = follower.poll()
    assert stats is not None and stats.messages == 1 and stats.held == 1
    assert _content(ConversationGraph(store, session)) == _one_shot(trace)
    assert follower.poll() is None  # settled once
    _write(trace, _turns(2, 2), "a")  # the next round: the tool result ends the response
    clock.now += 5
    follower.poll()
    follower.poll()
    assert not notices and [info.id for info in store.sessions()] == [session]
    assert follower.session == session


def test_a_response_imported_before_its_end_is_imported_again_whole(tmp_path: Path) -> None:
    """With ``settle`` 0 (or a response that stays unfinished longer than it: a long call
    streaming), a response is imported as it stands. When a later block extends it, the
    session is forked back to before it and the response imported whole, as a one-shot
    import has it; the part imported before stays on a side branch, in the same session."""
    trace = tmp_path / "session.jsonl"
    second = _first_block_of_a_response(trace)
    store = SQLStore(tmp_path / "f.db")
    notices: list[str] = []
    follower = TraceFollower(store, trace, on_notice=notices.append, settle=0)
    follower.poll()
    session = follower.session
    assert session is not None
    early = ConversationGraph(store, session).to_openai()
    assert early[-1] == {"role": "assistant", "content": "let me look"}
    _write(trace, [second], "a")
    stats = follower.poll()
    assert stats is not None and stats.held == 1 and stats.messages == 1
    assert notices and "imported again whole from record 2" in notices[-1]
    assert follower.session == session and [i.id for i in store.sessions()] == [session]
    graph = ConversationGraph(store, session)
    assert graph.to_openai() == _one_shot(trace)[0]
    shown = {step.node.id for step in graph.visible(expose="full")}
    partial = [n for n in graph.nodes() if n.id not in shown]
    assert [n.payload.content for n in partial] == ["let me look"]  # kept, on a side branch
    _write(trace, [_record("user", "r1", "a2", _result("t1", "done"))], "a")
    follower.poll()  # its result ends it: nothing to import again, no new notice
    assert len(notices) == 1
    assert ConversationGraph(store, session).to_openai() == _one_shot(trace)[0]
    again = import_trace(trace, ConversationGraph(store, session))
    assert again.already_imported  # a one-shot import of the file finds it all there


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text}],
    }


def _streamed(rounds: int) -> list[dict[str, Any]]:
    """Rounds whose response is written a block at a time: text, then one or two calls."""
    records = []
    for n in range(1, rounds + 1):
        records.append(_record("user", f"u{n}", None, {"role": "user", "content": f"step {n}"}))
        response = {"id": f"m{n}", "type": "message", "role": "assistant", "model": "claude-test"}
        blocks: list[dict[str, Any]] = [{"type": "text", "text": f"thinking about {n}"}]
        calls = [f"t{n}a", f"t{n}b"] if n % 2 else [f"t{n}"]
        blocks += [{"type": "tool_use", "id": c, "name": "Bash", "input": {"c": c}} for c in calls]
        for k, block in enumerate(blocks):
            records.append(_record("assistant", f"a{n}.{k}", None, response | {"content": [block]}))
        records += [_record("user", f"r{c}", None, _result(c, f"ok {c}")) for c in calls]
    return records


@pytest.mark.parametrize("settle", [0, 5])
def test_at_every_line_the_session_reads_as_a_one_shot_import(
    tmp_path: Path, settle: float
) -> None:
    """Polled after every line (and the file left quiet for ``settle`` each time), a
    transcript whose responses come a block at a time stays one session whose prompt is
    what a one-shot import of the file so far gives."""
    records = _streamed(4)
    trace = tmp_path / "session.jsonl"
    trace.write_bytes(b"")
    store = SQLStore(tmp_path / "f.db")
    clock = _Clock()
    follower = TraceFollower(store, trace, format="claude-code", settle=settle, clock=clock)
    for n, record in enumerate(records, 1):
        _write(trace, [record], "a")
        follower.poll()
        clock.now += settle
        follower.poll()
        assert follower.error is None and follower.session is not None
        assert ConversationGraph(store, follower.session).to_openai() == _one_shot(trace)[0], n
    assert [info.id for info in store.sessions()] == [follower.session]
    graph = ConversationGraph(store, follower.session)
    assert not graph.state.pending  # a call of a response imported again is not left running
    abandoned = [n for n in graph.nodes() if n.result is not None and n.result.content == ABANDONED]
    assert abandoned  # each poll after the quiet imported a response unfinished


def test_a_negative_settle_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="settle must be 0 or more seconds, got -1"):
        TraceFollower(SQLStore(tmp_path / "f.db"), tmp_path / "x.jsonl", settle=-1)


def _first_block_of_a_response(trace: Path) -> dict[str, Any]:
    """Write a prompt and the first block of a response (text); return its second (a call)."""
    text = {"type": "text", "text": "let me look"}
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
    response = {"id": "m1", "type": "message", "role": "assistant", "model": "claude-test"}
    first = _record("assistant", "a1", "u1", response | {"content": [text]})
    _write(trace, [_record("user", "u1", None, {"role": "user", "content": "go"}), first])
    return _record("assistant", "a2", "a1", response | {"content": [call]})


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_command_line_refuses_a_negative_settle(tmp_path: Path, capsys: Any) -> None:
    from openprogram.cli import main

    argv = ["mcp", "--db", str(tmp_path / "f.db"), "--follow", str(tmp_path / "x.jsonl")]
    assert main([*argv, "--settle", "-1"]) == 2
    assert "--settle must be 0 or more seconds, got -1.0" in capsys.readouterr().err


def test_a_path_that_cannot_be_followed_is_one_usage_error(tmp_path: Path, capsys: Any) -> None:
    from openprogram.cli import main

    folder = tmp_path / "folder"
    folder.mkdir()
    assert main(["mcp", "--db", str(tmp_path / "f.db"), "--follow", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"--follow {folder}: " in err and err.count("Is a directory") == 1


def test_the_record_of_imports_does_not_grow_with_every_poll(tmp_path: Path) -> None:
    """Each poll's import replaces the follower's previous one in the session's record of
    imports: a long session polled every second must not rewrite an ever longer list."""
    trace = tmp_path / "session.jsonl"
    _write(trace, _turns(1, 1))
    store = SQLStore(tmp_path / "f.db")
    follower = TraceFollower(store, trace, settle=0)
    for n in range(2, 31):
        _write(trace, _turns(n, n), "a")
        assert follower.poll() is not None
    assert follower.session is not None
    graph = ConversationGraph(store, follower.session)
    assert len(store.session_meta(follower.session)[IMPORTED_KEY]) == 1
    assert _content(graph) == _one_shot(trace)
    again = import_trace(trace, graph)  # the finished file, imported by hand: nothing new
    assert again.already_imported and again.messages == 0


def test_a_follower_goes_on_with_a_session_scrubbed_by_another_process(tmp_path: Path) -> None:
    trace, db = tmp_path / "agent.jsonl", tmp_path / "follow.db"

    def record(n: int, content: str) -> str:
        parent = f"u{n - 1}" if n > 1 else None
        message = {"role": "user", "content": content}
        return json.dumps(
            {"parentUuid": parent, "isSidechain": False, "userType": "external",
             "sessionId": "f-1", "type": "user", "uuid": f"u{n}",
             "timestamp": "2026-01-01T10:00:00.000Z", "message": message}
        ) + "\n"  # fmt: skip

    trace.write_text(record(1, f"deploy with {SECRET}") + record(2, "then test"))
    store = SQLStore(db)
    follower = TraceFollower(store, trace, session="s", settle=0)
    assert follower.poll() is not None
    scrub_elsewhere(db)
    with trace.open("a") as out:
        out.write(record(3, "and ship"))
    grown = follower.poll()
    assert grown is not None and follower.error is None and follower.session == "s"
    texts = [str(m.get("content")) for m in ConversationGraph(store, "s").to_openai()]
    assert texts == ["deploy with [REDACTED:pattern-1]", "then test", "and ship"]
    assert [info.id for info in store.sessions()] == ["s"]
    store.close()
