"""Programs: the offline demo, and ``run FILE.py`` for a user's agent program."""

from __future__ import annotations

import argparse
import collections
import inspect
import json
import runpy
import sys
import traceback
from pathlib import Path

from rich.markup import escape
from rich.progress import Progress

from graph import Tool
from openprogram._cli._common import (
    UsageError,
    common_options,
    console,
    errors,
    policy_from,
    session_id,
    state_dir,
    token_budget,
)
from openprogram._words import counted

TIER_WORDS = {
    "offload": "moved a large tool output to a file; the prompt keeps its head, tail and id",
    "budget_reduction": "cut the middle out of the largest outputs still in the prompt",
    "microcompact": "replaced old tool results with one-line stubs",
    "collapse": "summarized a stretch of old rounds into a layer",
    "compact": "summarized the history before the recent rounds into a layer",
    "snip": "dropped the oldest rounds, leaving a note that names them",
    "emergency": "last resort: stubs for whatever still did not fit",
}


def _story(text: str) -> None:
    """A paragraph of the demo's story, wrapped to the console."""
    console.print(text, soft_wrap=False)


def cmd_demo(args: argparse.Namespace) -> int:
    """The nested research agent, offline, under a small budget; then its story: what the
    agent did, what each tier did, what the model read back, what the rollback restored."""
    from openprogram._demo import run_demo
    from openprogram._reports._tables import Grid
    from openprogram._reports._views import distribution_table, session_tree

    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("research agent", total=1)

        def step(done: int, total: int, what: str) -> None:
            progress.update(task, total=total, completed=done, description=what[:60])

        run = run_demo(
            getattr(args, "db", None), args.budget, state_dir=state_dir(args), progress=step
        )
    session = run.session
    graph = session.graph
    functions = collections.Counter(
        str(getattr(n.payload, "name", "")) for n in graph.nodes() if n.kind == "function"
    )
    console.rule("1. what the agent did")
    _story(
        f"The research agent answered {counted(len(run.answers), 'question')} under a "
        f"{args.budget:,}-token budget: {counted(functions['research'], 'research call')} ran "
        f"{counted(functions['investigate'], 'investigation')} and "
        f"{counted(functions['synthesize'], 'synthesis')}, "
        f"then one review read back what a summary hid. Each call is a function node; the "
        f"tiers listed under one are those that fired in its own prompts."
    )
    title = f"session [bold]{session.id}[/] ({counted(len(graph), 'node')}, {session.store.url})"
    console.print(session_tree(graph, title=title, fired=run.fired, messages=False))

    console.rule("2. what each tier did")
    table = Grid(f"{len(run.records)} compaction decisions")
    table.column("tier", "id", key=True)
    table.column("fired", "number")
    table.column("tokens before → after, in all", "number")
    table.column("what it does")
    for tier, words in TIER_WORDS.items():
        records = [r for r in run.records if r.tier == tier]
        if records:
            before = sum(r.tokens_before for r in records)
            after = sum(r.tokens_after for r in records)
            table.row(tier, f"{len(records):,}", f"{before:,} → {after:,}", words)
    console.print(table)
    preview = session.engine.preview()
    console.print(
        distribution_table(
            preview,
            session.engine.counter,
            title=f"the next top-level prompt: {preview.tokens:,} of {preview.budget:,} tokens",
        )
    )

    console.rule("3. what the model read back")
    call = run.read_back
    if call is not None and isinstance(call.payload, Tool):
        hidden = str(json.loads(call.payload.arguments or "{}").get("id", ""))
        hidden = hidden.removeprefix("fn_")
        name = getattr(graph.get(hidden).payload, "name", "function") if hidden in graph else ""
        _story(
            f"A summary hid an earlier {name or 'function'} call. The review asked for it "
            "back with the history tool the summary names:"
        )
        console.print(f"  {call.payload.name}({call.payload.arguments})", markup=False)
        returned = call.result.content if call.result is not None else ""
        lines = str(returned).splitlines()
        shown = counted(len(lines), "line")
        _story(f"It returned what happened inside that call ({shown}), beginning:")
        for line in lines[:4]:
            console.print("  " + _fit(line), markup=False)
        _story("The review then answered:")
        console.print("  " + _fit(run.review), markup=False)
    else:
        _story(f"The review answered: {run.review}")

    console.rule("4. what the rollback restored")
    if run.rolled_back is not None and run.before is not None and run.after is not None:
        layer = run.rolled_back
        others = [info.id for info in run.taken if info.id != layer.id]
        went = (
            f" The {counted(len(others), 'compaction')} built on it went with it: "
            f"{', '.join(others)}."
            if others
            else ""
        )
        again = ", ".join(dict.fromkeys(a.tier for a in run.after.actions))
        fits = (
            "so the cascade had nothing to do"
            if not again
            else f"after the cascade applied {again} again"
        )
        _story(
            f"Rolling back collapse {layer.id} ({counted(len(layer.covers), 'node')}) put the "
            f"rounds it summarized back into the prompt, exactly as they were.{went} The next "
            f"top-level prompt grew from {run.before.tokens:,} to {run.after.tokens:,} tokens, "
            f"still within the {run.after.budget:,}-token budget, {fits}."
        )
    else:
        _story("No collapse was made at this budget, so there was nothing to roll back.")
    fired = sorted({t for counts in run.fired.values() for t in counts if t in TIER_WORDS})
    console.rule("next")
    console.print(f"tiers that fired: {', '.join(fired)}")
    db = getattr(args, "db", None)
    where = f" --db {db}" if db else ""
    console.print(f"look closer: openprogram{where} show {session.id}")
    console.print(f"             openprogram{where} records {session.id}")
    console.print(f"             openprogram{where} collapses {session.id}")
    session.close()
    return 0


def _fit(text: str, width: int = 110) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


RUN_HELP = """Run an agent program against a session. The file's module code runs with the
session bound, so its llm() calls and @functions are stored there. Then, if the file
defines main, it is called (sync or async) according to its parameters: main(),
main(session), or main(session, args) where args is the list of words after `--`
(also in sys.argv[1:]). What main returns is printed. An exception in the program
shows the program's own traceback and exits 1."""


def cmd_run(args: argparse.Namespace) -> int:
    """Run an agent program against a session (see ``RUN_HELP``)."""
    from openprogram._runtime._session import Session

    path = Path(args.file)
    if not path.is_file():
        raise UsageError(f"no program file {path}")
    # A session that exists runs as it is configured; options given are explicit changes.
    session = Session(
        getattr(args, "db", None),
        args.session,
        model=args.model,
        policy=policy_from(args) if getattr(args, "policy", None) else None,
        budget=args.budget,
        state_dir=state_dir(args),
    )
    try:
        with session:
            sys.argv = [str(path), *args.args]
            try:
                namespace = runpy.run_path(str(path), run_name="__openprogram_run__")
                entry = namespace.get("main")
                result = None
                if callable(entry):
                    wants = len(inspect.signature(entry).parameters)
                    given = (session, list(args.args))[:wants]
                    result = session.run(entry, *given)
            except Exception as error:
                if getattr(args, "debug", False):
                    raise
                errors.print(f"[red]error in {escape(str(path))}:[/]")
                errors.print(_their_traceback(error, path), markup=False, end="")
                return 1
            if result is not None:
                console.print(result)
    finally:
        session.close()
    console.print(f"session {session.id} in {session.store.url}")
    return 0


def _their_traceback(error: BaseException, path: Path) -> str:
    """The traceback of an error in a user's program, cut to the program's own frames
    (ours, which ran it, are noise to them)."""
    mine = path.resolve()
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if Path(frame.filename).resolve() == mine
    ]
    head = "Traceback (the program's own frames):\n" if frames else ""
    body = "".join(traceback.format_list(frames))
    return head + body + "".join(traceback.format_exception_only(type(error), error))


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = common_options()
    demo = sub.add_parser(
        "demo", parents=[common], help="run the nested research agent offline, then show it"
    )
    demo.add_argument(
        "--budget",
        type=token_budget,
        default=2_200,
        help="the prompt's token budget (default 2200)",
    )
    demo.set_defaults(run=cmd_demo)
    run = sub.add_parser(
        "run",
        parents=[common],
        help="run an agent program against a session",
        description=RUN_HELP,
    )
    run.add_argument(
        "file", help="a Python file; main(), main(session) or main(session, args) is called"
    )
    run.add_argument("args", nargs="*", help="the program's own arguments (after --)")
    run.add_argument("--model", help="a litellm model the program's llm() calls use")
    run.add_argument(
        "--session", type=session_id, help="a session id to continue (default: a new session)"
    )
    run.add_argument("--policy", choices=("claude-code", "progressive"))
    run.add_argument("--budget", type=token_budget)
    run.set_defaults(run=cmd_run)
