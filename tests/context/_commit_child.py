"""A second process for the commit tests: opens a session, waits for ``go`` on stdin (so
two children act at the same moment), does one thing and prints what happened.

    python _commit_child.py URL SESSION STATE_DIR rollback LAYER
    python _commit_child.py URL SESSION STATE_DIR layer NODE NODE …
    python _commit_child.py URL SESSION STATE_DIR collapse FIRST LAST [BRANCH]
"""

from __future__ import annotations

import sys
from pathlib import Path

from context import AlreadyRolledBack, CommitConflict, ContextEngine, Policy
from graph import ConversationGraph, LayerConflict, SQLStore


def main() -> None:
    url, session, state_dir, action, *args = sys.argv[1:]
    graph = ConversationGraph(SQLStore(url), session)
    engine = ContextEngine(graph, Policy(), budget=100_000, state_dir=Path(state_dir))
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    try:
        if action == "rollback":
            engine.rollback(args[0])
        elif action == "layer":
            graph.add_layer("collapse", args, [{"role": "user", "content": "elsewhere"}])
        else:
            if len(args) > 2:
                graph.checkout(args[2])
            engine.collapse(args[0], args[1], head=graph.head)
    except (AlreadyRolledBack, CommitConflict, LayerConflict) as refused:
        print(f"refused {type(refused).__name__}", flush=True)
    else:
        print("ok", flush=True)


if __name__ == "__main__":
    main()
