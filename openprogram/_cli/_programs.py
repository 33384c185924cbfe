"""Programs: the offline demo, and ``run FILE.py`` for a user's agent program."""

from __future__ import annotations

import argparse
import inspect
import runpy
import sys
from pathlib import Path

from rich.progress import Progress

from openprogram._cli._common import UsageError, common_options, console, policy_from, state_dir


def cmd_demo(args: argparse.Namespace) -> int:
    """The nested research agent, offline, under a small budget; then what it did."""
    from openprogram._demo import run_demo
    from openprogram._views import (
        distribution_table,
        layer_savings,
        layers_table,
        records_table,
        session_tree,
    )

    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("research agent", total=1)

        def step(done: int, total: int, what: str) -> None:
            progress.update(task, total=total, completed=done, description=what[:60])

        run = run_demo(
            getattr(args, "db", None), args.budget, state_dir=state_dir(args), progress=step
        )
    session = run.session
    graph = session.graph
    console.rule("the session")
    title = f"session [bold]{session.id}[/] ({len(graph)} nodes, {session.store.url})"
    console.print(session_tree(graph, title=title, fired=run.fired, messages=False))
    console.rule("the next prompt, /context style")
    preview = session.engine.preview()
    console.print(
        distribution_table(
            preview,
            session.engine.counter,
            title=f"top level: {preview.tokens:,} of {preview.budget:,} tokens "
            f"({session.policy.context_window:,}-token window, {session.policy.name})",
        )
    )
    console.rule("compaction records")
    console.print(records_table(run.records, title=f"{len(run.records)} records"))
    layers = session.engine.layers()
    console.print(layers_table(layers, layer_savings(session.engine, layers), title="layers"))
    console.rule("the review read back a hidden investigation")
    console.print(run.review)
    if run.rolled_back is not None and run.before is not None and run.after is not None:
        console.rule("one rollback")
        console.print(
            f"rolled back collapse {run.rolled_back.id}: the top-level prompt went from "
            f"{run.before.tokens:,} to {run.after.tokens:,} tokens before the cascade, "
            f"which then keeps it under {run.after.budget:,} "
            f"({', '.join(dict.fromkeys(a.tier for a in run.after.actions)) or 'nothing to do'})"
        )
    fired = sorted({tier for counts in run.fired.values() for tier in counts})
    console.print(f"tiers that fired: {', '.join(fired)}")
    console.print(f"records: {session.folder.path}/records/{session.id}.jsonl")
    session.close()
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Run an agent program against a session: the file's module code runs with the
    session bound, then its ``main`` (if it defines one; sync or async, taking the session
    or nothing)."""
    from openprogram._session import Session

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
            namespace = runpy.run_path(str(path), run_name="__openprogram_run__")
            entry = namespace.get("main")
            if callable(entry):
                wants = len(inspect.signature(entry).parameters)
                result = session.run(entry, session) if wants else session.run(entry)
                if result is not None:
                    console.print(result)
    finally:
        session.close()
    console.print(f"session {session.id} in {session.store.url}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = common_options()
    demo = sub.add_parser(
        "demo", parents=[common], help="run the nested research agent offline, then show it"
    )
    demo.add_argument("--budget", type=int, default=2_200)
    demo.set_defaults(run=cmd_demo)
    run = sub.add_parser("run", parents=[common], help="run an agent program against a session")
    run.add_argument("file", help="a Python file (its main(), if any, is called)")
    run.add_argument("args", nargs="*", help="arguments for the program (after --)")
    run.add_argument("--model", help="a litellm model the program's llm() calls use")
    run.add_argument("--session", help="a session id to continue (default: a new session)")
    run.add_argument("--policy", choices=("claude-code", "progressive"))
    run.add_argument("--budget", type=int)
    run.set_defaults(run=cmd_run)
