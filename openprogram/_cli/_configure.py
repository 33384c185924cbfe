"""A session's stored configuration (show it, change it explicitly); moving the files of
an old shared ``./.openprogram`` folder into the database's own state folder, and adopting
a state folder on purpose (a copied database's)."""

from __future__ import annotations

import argparse
from pathlib import Path

import msgspec

from context import adopt_state_folder, encoding_name_for, migrate_state
from openprogram._cli._common import (
    common_options,
    console,
    existing_session,
    folder_of,
    open_store,
    print_json,
    state_dir,
    token_budget,
)
from openprogram._runtime._config import (
    SessionConfig,
    load_config,
    parse_setting,
    record_change,
    with_fields,
)
from openprogram._words import counted


def cmd_configure(args: argparse.Namespace) -> int:
    """Show a session's configuration, or change it: an explicit, recorded event that every
    later reopening, render and process uses (and that starts new tier state)."""
    from openprogram._runtime._config import policy_for

    asked = bool(args.policy or args.model or args.set or args.budget is not None)
    graph = existing_session(args, args.session, read_only=not asked)  # showing writes nothing
    store = graph.store
    stored = load_config(store, graph.session)
    current = stored or SessionConfig(policy=policy_for(None).stored())
    policy = current.make_policy()
    if args.policy or args.model:
        from context import Policy

        policy = Policy.named(args.policy or policy.name, args.model or policy.model)
    settings = dict(parse_setting(text) for text in args.set or ())
    if settings:
        policy = with_fields(policy, settings)
    values: dict[str, object] = {"policy": policy.stored()}
    if args.budget is not None:
        values["budget"] = args.budget
    if args.model:
        values["model"], values["model_by_name"] = args.model, True
    wanted = msgspec.structs.replace(current, **values)  # checked where it is stored
    found = (
        record_change(store, graph.session, folder_of(args, store), stored, wanted) if asked else {}
    )  # without a change asked for it only shows (what a session without one runs with)
    shown = load_config(store, graph.session) or wanted
    if args.json:
        print_json({"session": graph.session, "changed": found, "config": shown.describe()})
        return 0
    if found.get("created"):
        given = [name for name in ("budget", "policy", "model") if getattr(args, name)]
        console.print(
            f"session {graph.session}: configuration stored for the first time "
            f"({', '.join([*given, *settings]) or 'defaults'} set; it ran with defaults before)"
        )
    elif found:
        console.print(f"session {graph.session}: changed {', '.join(sorted(found))} (recorded)")
    elif asked:
        console.print(f"session {graph.session}: nothing changed")
    elif stored is None:
        console.print(f"session {graph.session}: no configuration stored; it runs with defaults")
    policy = shown.make_policy()
    budget = shown.budget if shown.budget is not None else policy.budget
    console.print(
        f"policy {policy.name}, budget {budget:,} of a {policy.context_window:,}-token window, "
        f"model {shown.model or '(none)'} (tokenizer {encoding_name_for(policy.model)}), "
        f"redact {'on' if shown.redact else 'off'}, "
        f"max_steps {shown.max_steps}"
    )
    return 0


def cmd_migrate_state(args: argparse.Namespace) -> int:
    """Copy this database's files out of an old shared state folder (``./.openprogram``)."""
    store = open_store(args, create=False)
    folder = folder_of(args, store)
    done = migrate_state(store, folder, Path(args.source))
    if args.json:
        copied = [str(p) for p in done.copied]
        print_json({"folder": str(folder.path), "copied": copied, "skipped": done.skipped})
        return 0
    for path in done.copied:
        console.print(f"copied {path}")
    for line in done.skipped:
        console.print(f"skipped {line}")
    console.print(
        f"{counted(len(done.copied), 'file')} copied into {folder.path} (the originals are kept)"
        + (f"; {len(done.skipped)} skipped: not what the database holds" if done.skipped else "")
    )
    return 0


def cmd_adopt_state(args: argparse.Namespace) -> int:
    """Make a state folder this database's on purpose: a new database UUID (``--rekey``: a
    copy becomes its own database), or the folder taken over; recorded in the folder."""
    store = open_store(args, create=False)
    done = adopt_state_folder(store, state_dir(args), rekey=args.rekey)
    if args.json:
        print_json({key: value for key, value in vars(done).items()})
        return 0
    if done.previous_database is not None:
        where = (
            f"its default folder {done.folder} serves another file and is left to it: name "
            "another with --state-dir"
            if done.left == done.folder
            else f"its state folder is {done.folder}"
        )
        console.print(
            f"{done.owner or store.url} is now database {done.database} "
            f"(was {done.previous_database}); {where}"
        )
    elif done.previous_owner is not None:
        console.print(
            f"{done.folder} now serves {done.owner} (taken over from {done.previous_owner}; "
            "recorded in its .openprogram-database.history)"
        )
    else:
        console.print(f"{done.folder} serves {done.owner or store.url} (nothing to change)")
    if done.left is not None and done.left != done.folder:
        console.print(f"{done.left} is left to the database it serves")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = common_options()
    configure = sub.add_parser(
        "configure",
        parents=[common],
        help="show or change how a session runs (stored with it, recorded)",
    )
    configure.add_argument("session")
    configure.add_argument("--budget", type=token_budget, help="the prompt budget in tokens")
    configure.add_argument(
        "--policy", choices=("claude-code", "progressive"), help="start from this preset"
    )
    configure.add_argument("--model", help="the model name (its window from the model map)")
    configure.add_argument(
        "--set",
        action="append",
        metavar="FIELD=VALUE",
        help="change one policy setting (VALUE as JSON), e.g. --set low_water=0.6",
    )
    configure.add_argument("--json", action="store_true", help="print JSON")
    configure.set_defaults(run=cmd_configure)
    migrate = sub.add_parser(
        "migrate-state",
        parents=[common],
        help="copy this database's files out of an old shared ./.openprogram folder",
    )
    migrate.add_argument(
        "--from", dest="source", default=".openprogram", help="the old folder (.openprogram)"
    )
    migrate.add_argument("--json", action="store_true", help="print JSON")
    migrate.set_defaults(run=cmd_migrate_state)
    adopt = sub.add_parser(
        "adopt-state",
        parents=[common],
        help="make a state folder this database's on purpose (a copied database's; recorded)",
    )
    adopt.add_argument(
        "--rekey",
        action="store_true",
        help="give the database a new UUID: a copy becomes its own database, with its own folder",
    )
    adopt.add_argument("--json", action="store_true", help="print JSON")
    adopt.set_defaults(run=cmd_adopt_state)
