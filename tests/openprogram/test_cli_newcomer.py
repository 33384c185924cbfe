"""The newcomer's path through the real entry point: what a person types from the README,
and what they see. Each test here failed before the fix it names."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from graph import ConversationGraph, SQLStore
from openprogram.cli import main

README = Path(__file__).parents[2] / "README.md"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def chat_trace(path: Path, rounds: int = 6) -> Path:
    """A small OpenAI-format trace with tool rounds."""
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "You fix bugs."},
        {"role": "user", "content": "Fix the failing export test in src/export.py"},
    ]
    for i in range(rounds):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": f"reading {i}", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"line {i}\n" * 50})
    messages.append({"role": "assistant", "content": "The bug is in handler_3."})
    path.write_text(json.dumps(messages))
    return path


def test_replaying_into_the_same_database_twice_makes_two_sessions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = chat_trace(tmp_path / "chat.json")
    db = str(tmp_path / "r.db")
    state = str(tmp_path / "state")
    for budget in ("2000", "1000"):
        code, _, err = run(capsys, "--db", db, "replay", str(trace), "--budget", budget,
                           "--state-dir", state)  # fmt: skip
        assert (code, err) == (0, "")
    sessions = SQLStore(db, create=False).sessions()
    assert len(sessions) == 2 and all(info.nodes > 10 for info in sessions)


def test_a_database_error_is_one_short_line_without_class_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from graph import register_store

    class IntegrityError(Exception):
        pass

    raised: list[BaseException] = []

    def failing(*_: object, **__: object) -> SQLStore:
        raise raised[-1]

    register_store("failing-test", failing)

    def one_line(error: BaseException) -> str:
        """What the CLI prints when opening the database raised ``error``."""
        raised.append(error)
        code, out, err = run(capsys, "--db", "failing-test://host/db", "sessions")
        assert (code, out) == (1, "") and err.startswith("error: ") and err.count("\n") == 1
        return err.removeprefix("error: ").removesuffix("\n")

    raw = IntegrityError("UNIQUE constraint failed: graph_nodes.id [SQL: INSERT …] " + "x" * 5000)
    text = one_line(raw)
    assert text == "UNIQUE constraint failed: graph_nodes.id"
    missing = one_line(FileNotFoundError(2, "No such file or directory", "t.json"))
    assert missing == "No such file or directory: t.json"
    assert len(one_line(ValueError("y" * 5000))) < 400


def test_bench_skips_a_baseline_whose_extra_is_missing_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "langchain_core.messages", None)  # a plain install
    trace = chat_trace(tmp_path / "chat.json")
    code, out, err = run(capsys, "bench", str(trace), "--policies", "none,trim,claude-code",
                         "--json", "--budget", "1500")  # fmt: skip
    assert code == 0
    assert [json.loads(line)["policy"] for line in out.splitlines()] == ["none", "claude-code"]
    notes = err.strip().splitlines()
    assert len(notes) == 1 and "skipped trim" in notes[0] and "openprogram[bench]" in notes[0]


def test_replay_plot_checks_matplotlib_and_the_folder_before_replaying(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = chat_trace(tmp_path / "chat.json")
    db = tmp_path / "r.db"
    missing = tmp_path / "nowhere" / "x.png"
    code, _, err = run(capsys, "--db", str(db), "replay", str(trace), "--plot", str(missing))
    assert code == 1 and "no folder" in err and not missing.parent.exists() and not db.exists()
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, _, err = run(capsys, "--db", str(db), "replay", str(trace), "--plot", "x.png")
    assert code == 1 and "matplotlib" in err and not db.exists()


def _readme_command_lines() -> list[str]:
    """Every command line the README shows: code spans in the command-line section that
    start with a command, and ``openprogram …`` anywhere."""
    from openprogram.cli import parser

    text = README.read_text()
    section = text[text.index("## The command line") :]
    section = section[: section.index("\n## ", 1)]
    commands = set(_subcommands(parser()))
    spans = re.findall(r"`([^`\n]+)`", section)
    lines = [span for span in spans if span.split()[0] in commands]
    # A line ends where the shell takes over: a pipe, a redirection, a background job.
    typed = re.findall(r"(?:^|`|\$ )openprogram ([a-z-][^`\n|#>&;]*)", text, flags=re.M)
    lines += [line.strip() for line in typed]
    return lines


def _subcommands(top: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def _argv(line: str) -> list[str]:
    """A README line as arguments: placeholders become values, optional parts are taken."""
    words = shlex.split(line.replace("[", " ").replace("]", " ").replace("…", ""))
    return ["x" if word.isupper() else word for word in words]


def test_every_command_line_in_the_readme_parses() -> None:
    from openprogram.cli import parser

    lines = _readme_command_lines()
    assert len(lines) > 15 and any(line.startswith("rollback ") for line in lines)
    for line in lines:
        try:
            parser().parse_args(_argv(line))
        except SystemExit as exit:  # --help exits 0
            if exit.code:
                pytest.fail(f"README: `{line}` does not parse")


def test_the_readme_names_every_command() -> None:
    from openprogram.cli import parser

    named = {line.split()[0] for line in _readme_command_lines()}
    assert set(_subcommands(parser())) <= named


def _sessions(db: str) -> dict[str, int]:
    return {info.id: info.nodes for info in SQLStore(db, create=False).sessions()}


def test_reimport_is_recognized_whatever_the_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "i.db")
    trace = chat_trace(tmp_path / "chat.json")
    assert run(capsys, "--db", db, "import", str(trace))[0] == 0
    first = _sessions(db)
    code, out, _ = run(capsys, "--db", db, "import", str(trace))
    assert code == 0 and "nothing added" in out and _sessions(db) == first
    (session,) = first
    code, out, _ = run(capsys, "--db", db, "import", str(trace), "--session", session)
    assert code == 0 and "nothing added" in out and _sessions(db) == first
    code, _, err = run(capsys, "--db", db, "import", str(trace), "--session", "other")
    assert code == 2 and f"already imported into session {session}" in err
    assert _sessions(db) == first


def test_a_grown_trace_adds_only_its_new_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "i.db")
    lines = [json.dumps({"role": "user", "content": f"message {i}"}) for i in range(6)]
    trace = tmp_path / "log.jsonl"
    trace.write_text("\n".join(lines[:4]) + "\n")
    assert run(capsys, "--db", db, "import", str(trace))[0] == 0
    trace.write_text("\n".join(lines) + "\n")  # the transcript grew by two lines
    code, out, _ = run(capsys, "--db", db, "import", str(trace))
    assert code == 0 and "after the 4 records it held" in out
    (session, nodes) = next(iter(_sessions(db).items()))
    assert nodes == 6
    graph = ConversationGraph.open(db, session=session)
    assert [m["content"] for m in graph.to_openai()] == [f"message {i}" for i in range(6)]


def test_importing_into_another_traces_session_is_refused_unless_appending(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "i.db")
    one = chat_trace(tmp_path / "one.json", rounds=2)
    two = tmp_path / "two.json"
    two.write_text(json.dumps([{"role": "user", "content": "another conversation"}]))
    assert run(capsys, "--db", db, "import", str(one), "--session", "s")[0] == 0
    before = _sessions(db)
    code, _, err = run(capsys, "--db", db, "import", str(two), "--session", "s")
    assert code == 1 and "already holds another conversation" in err and "--append" in err
    assert _sessions(db) == before
    assert run(capsys, "--db", db, "import", str(two), "--session", "s", "--append")[0] == 0
    assert _sessions(db) == {"s": before["s"] + 1}


def test_the_import_format_choices_are_the_importers(capsys: pytest.CaptureFixture[str]) -> None:
    from openprogram.importers import FORMATS

    with pytest.raises(SystemExit):
        main(["import", "--help"])
    assert "{" + ",".join(FORMATS) + "}" in capsys.readouterr().out


def _rich_session(db: str, state: Path) -> ConversationGraph:
    """Tool rounds, a finished function, a collapse layer and a rolled-back one, a fork."""
    from context import ContextEngine, Policy

    g = ConversationGraph.open(db, session="s1")
    g.append({"role": "system", "content": "You are terse.\x01"})
    g.append({"role": "user", "content": "Find why /export is slow. key sk-abcdefghijklmnopqrstu"})
    assistants = []
    for i in range(8):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
        a = g.append({"role": "assistant", "content": f"reading {i}", "tool_calls": [call]})
        assistants.append(a.id)
        g.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"def fn_{i}(): ...\n" * 9})
    with g.function("research", input={"q": "export"}) as fn:
        g.append({"role": "assistant", "content": "route() scans every handler"})
        fn.output = {"answer": "route() is O(n)"}
    engine = ContextEngine(g, Policy(), budget=100_000, state_dir=state)
    engine.collapse(assistants[0], assistants[2])
    undone = engine.collapse(assistants[4], assistants[6])
    engine.rollback(undone.id, reason="look again")
    return g


def _log(graph: ConversationGraph) -> list[object]:
    import msgspec

    return [msgspec.to_builtins(record) for record in graph.state.records]


@pytest.mark.parametrize("suffix", [".json", ".graphml"])
def test_an_export_loads_back_losslessly(
    suffix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, copy = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    original = _rich_session(db, tmp_path / "state")
    out = tmp_path / f"s1{suffix}"
    code, _, err = run(capsys, "--db", db, "export", "s1", str(out), "--no-redact")
    assert (code, err) == (0, "")
    assert ("<graphml" in out.read_text()) == (suffix == ".graphml")  # format from the name
    assert "route() is O(n)" in out.read_text() and "sk-abcdefghijklmnopqrstu" in out.read_text()
    code, out_text, err = run(capsys, "--db", copy, "import", str(out))
    assert (code, err) == (0, "") and "loaded" in out_text
    loaded = ConversationGraph.open(copy, session="s1")
    assert _log(loaded) == _log(original)
    assert loaded.to_openai() == original.to_openai() and loaded.head == original.head
    assert [(i.id, i.active, i.covers) for i in loaded.layers()] == [
        (i.id, i.active, i.covers) for i in original.layers()
    ]
    code, _, err = run(capsys, "--db", db, "import", str(out))  # its ids are taken there
    assert code == 1 and "already holds the nodes of this export" in err


def test_an_export_redacts_secrets_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "a.db")
    _rich_session(db, tmp_path / "state")
    out = tmp_path / "s1.json"
    assert run(capsys, "--db", db, "export", "s1", str(out))[0] == 0
    text = out.read_text()
    assert "sk-abcdefghijklmnopqrstu" not in text and "Find why /export is slow" in text
    code, _, err = run(capsys, "--db", db, "export", "s1", str(tmp_path / "s1.txt"))
    assert code == 1 and ".graphml" in err


ROOT = Path(__file__).resolve().parents[2]


def openprogram(*argv: str, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a person runs it (piped, ``COLUMNS`` as given)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(ROOT)
    if columns is not None:
        env["COLUMNS"] = str(columns)
    script = Path(sys.executable).parent / "openprogram"
    return subprocess.run(
        [str(script), *argv], capture_output=True, text=True, env=env, timeout=300, check=False
    )


@pytest.mark.parametrize("columns", [80, 120])
def test_tables_fit_columns_and_never_cut_a_number(tmp_path: Path, columns: int) -> None:
    trace = chat_trace(tmp_path / "a-rather-long-trace-name-for-a-table.json", rounds=12)
    argv = ["bench", str(trace), "--policies", "none,masking,claude-code", "--budget", "1500"]
    done = openprogram(*argv, columns=columns)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines and max(len(line) for line in lines) <= columns
    assert "…" not in done.stdout
    rows = [json.loads(line) for line in openprogram(*argv, "--json").stdout.splitlines()]
    for row in rows:
        assert f"{row['sent_tokens']:,}" in done.stdout  # whole, never "1,0…"
        assert f"{row['cost']:,.1f}".removesuffix(".0") in done.stdout
    assert "cache-" in done.stdout and "weighted" in done.stdout  # cost has a unit
    name = "".join(line.split("│")[1].strip() for line in lines if line.startswith("│"))
    assert "a-rather-long-trace-name-for-a-table.json" in name  # wrapped, not cut


def test_the_replay_table_has_its_own_title(tmp_path: Path) -> None:
    trace = chat_trace(tmp_path / "chat.json")
    done = openprogram("--db", str(tmp_path / "r.db"), "replay", str(trace), "--budget", "1500",
                       "--state-dir", str(tmp_path / "state"), columns=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "replay of chat.json at 1,500 tokens" in done.stdout
    assert "openprogram bench" not in done.stdout


@pytest.mark.parametrize("columns", [80, 120])
def test_layer_ids_are_whole_at_any_width(tmp_path: Path, columns: int) -> None:
    db = str(tmp_path / "a.db")
    graph = _rich_session(db, tmp_path / "state")
    state = str(tmp_path / "state")
    for command in ("collapses", "records"):
        done = openprogram("--db", db, "--state-dir", state, command, "s1", columns=columns)
        assert done.returncode == 0, done.stderr
        assert max(len(line) for line in done.stdout.splitlines()) <= columns
        for layer in graph.layers():
            assert layer.id in done.stdout


def test_the_demo_is_a_deterministic_story_in_120_columns(tmp_path: Path) -> None:
    outputs = []
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        done = openprogram("--db", str(folder / "demo.db"), "demo",
                           "--state-dir", str(folder / "state"), columns=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout.replace(str(folder), "FOLDER"))
    assert outputs[0] == outputs[1]  # the same figures and ids on a fresh database
    out = outputs[0]
    assert max(len(line) for line in out.splitlines()) <= 120
    parts = ["1. what the agent did", "2. what each tier did", "3. what the model read back",
             "4. what the rollback restored"]  # fmt: skip
    assert [out.index(part) for part in parts] == sorted(out.index(part) for part in parts)
    call = re.search(r'expand_function\(\{"id": "(n[0-9]+|[0-9A-Z]{26})"\}\)', out)  # a handle
    assert call is not None and "It returned what happened inside that call" in out
    went = re.search(r"The (\d+) (compactions?) built on it went with it: [0-9A-Z]{26}", out)
    assert went is not None and (went[1] == "1") == (went[2] == "compaction")  # issue 35
    assert "nothing to do)" not in out and "tiers at the top level: rollback" not in out
    assert "look closer: openprogram" in out


def test_a_demo_budget_below_the_fixed_part_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "--db", str(tmp_path / "d.db"), "demo", "--budget", "300",
                       "--state-dir", str(tmp_path / "state"))  # fmt: skip
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "system prompt and the tool schemas" in err and "max_steps" not in err
    assert SQLStore(str(tmp_path / "d.db"), create=False).sessions() == []


def test_show_prints_node_ids_and_ties_records_to_frames(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, state = str(tmp_path / "d.db"), str(tmp_path / "state")
    assert run(capsys, "--db", db, "--state-dir", state, "demo")[0] == 0
    (session,) = [info.id for info in SQLStore(db, create=False).sessions()]
    code, out, _ = run(capsys, "--db", db, "--state-dir", state, "show", session)
    assert code == 0
    graph = ConversationGraph.open(db, session=session)
    assert all(n.id in out for n in graph.nodes() if n.kind != "tool")
    assert "rollback" not in "".join(line for line in out.splitlines() if "tiers" in line)
    lines = out.splitlines()
    function_tiers = [
        i for i, line in enumerate(lines) if "tiers:" in line and "investigate" in lines[i - 1]
    ]
    assert function_tiers  # the records of an investigation's prompts, under it


def test_every_option_has_help_and_no_help_shows_rst(capsys: pytest.CaptureFixture[str]) -> None:
    from openprogram.cli import parser

    top = parser()
    missing = [
        f"{name} {option.option_strings or option.dest}"
        for name, command in _subcommands(top).items()
        for option in command._actions
        if not option.help
    ]
    assert missing == []
    with pytest.raises(SystemExit):
        main(["--help"])
    texts = [capsys.readouterr().out]
    for name in _subcommands(top):
        with pytest.raises(SystemExit):
            main([name, "--help"])
        texts.append(capsys.readouterr().out)
    assert not [text for text in texts if "``" in text]
    replay = _subcommands(top)["replay"].format_help()
    assert "{claude-code,progressive,none,masking,trim,native}" in replay  # --policy's choices


def test_silent_mistakes_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = chat_trace(tmp_path / "chat.json")
    missing = tmp_path / "nowhere" / "deeper" / "x.db"
    code, _, err = run(capsys, "--db", str(missing), "import", str(trace))
    assert code == 2 and "no folder" in err and not missing.parent.parent.exists()
    code, _, err = run(capsys, "--db", str(tmp_path), "sessions")
    assert code == 2 and "is a folder" in err
    with pytest.raises(SystemExit) as exit:
        main(["replay", str(trace), "--encoding", "nonsense"])
    assert exit.value.code == 2 and "unknown encoding 'nonsense'" in capsys.readouterr().err


def test_a_rollback_records_the_tokens_it_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, state = str(tmp_path / "a.db"), str(tmp_path / "state")
    graph = _rich_session(db, state)
    (layer,) = [info.id for info in graph.layers() if info.active]
    code, out, _ = run(capsys, "--db", db, "--state-dir", state, "rollback", "s1", layer)
    assert code == 0
    shown = re.search(r"next prompt ([\d,]+) → ([\d,]+) tokens", out)
    assert shown is not None
    code, out, _ = run(capsys, "--db", db, "--state-dir", state, "records", "s1", "--json")
    record = [r for r in json.loads(out) if r["tier"] == "rollback"][-1]
    printed = [int(x.replace(",", "")) for x in shown.groups()]
    assert [record["tokens_before"], record["tokens_after"]] == printed and printed[1] > 0
    code, _, err = run(capsys, "--db", db, "--state-dir", state, "rollback", "s1", "NOPE")
    assert code == 1 and "`openprogram collapses s1` lists them" in err
    assert "engine." not in err


def test_run_passes_the_arguments_and_shows_the_program_s_own_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "agent.py"
    program.write_text(
        "def check(words):\n"
        "    if 'boom' in words:\n"
        "        raise ValueError('boom')\n"
        "    return f'{len(words)} words: ' + ' '.join(words)\n\n"
        "def main(session, args):\n"
        "    return check(args)\n"
    )
    db = str(tmp_path / "r.db")
    state = str(tmp_path / "state")
    code, out, _ = run(capsys, "--db", db, "--state-dir", state, "run", str(program), "--",
                       "two", "--words")  # fmt: skip
    assert code == 0 and "2 words: two --words" in out
    code, _, err = run(capsys, "--db", db, "--state-dir", state, "run", str(program), "--", "boom")
    assert code == 1
    assert f"error in {program}" in err and "ValueError: boom" in err
    assert "raise ValueError('boom')" in err and "return check(args)" in err  # their lines
    assert "openprogram/_" not in err  # not ours
    from openprogram.cli import parser

    help_text = _subcommands(parser())["run"].format_help()
    assert "main(session, args)" in " ".join(help_text.split())


def test_help_of_session_documents_engine_graph_and_every_parameter() -> None:
    import inspect
    import pydoc

    from openprogram import Session

    text = pydoc.render_doc(Session, renderer=pydoc.plaintext)
    for name in ("engine:", "graph:", "history:"):
        assert name in text
    for name in inspect.signature(Session).parameters:
        assert f"{name}:" in text, name


def test_session_and_layer_times_are_one_type(tmp_path: Path) -> None:
    from context import ContextEngine, Policy

    graph = _rich_session(str(tmp_path / "a.db"), tmp_path / "state")
    engine = ContextEngine(graph, Policy(), state_dir=tmp_path / "state")
    (info,) = graph.store.sessions()
    assert type(info.created) is type(engine.layers()[0].at)


def test_a_second_demo_beside_the_first_gets_its_own_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a state folder serves one database, so: the same one
    db, state = str(tmp_path / "a.db"), str(tmp_path / "state")
    for _ in range(2):
        assert run(capsys, "--db", db, "--state-dir", state, "demo")[0] == 0
    first, second = [info.id for info in SQLStore(db, create=False).sessions()]
    assert first != second
    graphs = [ConversationGraph.open(db, session=session) for session in (first, second)]
    assert not {n.id for n in graphs[0].nodes()} & {n.id for n in graphs[1].nodes()}
