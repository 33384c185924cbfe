"""A session's engine as a front end renders with it: configured as the session stored it,
or as a what-if (another policy, model or budget) with sticky state of its own."""

from __future__ import annotations

import os

from context import ContextEngine, Policy
from graph import ConversationGraph
from openprogram._runtime._config import load_config, stored_engine
from openprogram._service._database import folder_of

__all__ = ["engine_for", "is_what_if", "policy_named"]


def policy_named(policy: str | None = None, model: str | None = None) -> Policy:
    """The policy ``policy`` and ``model`` name (claude-code for a 128k model by default)."""
    return Policy.named(policy or "claude-code", model)


def is_what_if(
    *, policy: str | None = None, model: str | None = None, budget: int | None = None
) -> bool:
    """Whether these ask for another configuration than the session's (a what-if)."""
    return policy is not None or model is not None or budget is not None


def engine_for(
    graph: ConversationGraph,
    *,
    policy: str | None = None,
    model: str | None = None,
    budget: int | None = None,
    state_dir: str | os.PathLike[str] | None = None,
) -> ContextEngine:
    """An engine configured as the session is: its stored policy and budget, and the tools
    of the last prompt it sent. ``policy``/``model``/``budget`` make it a what-if:
    configured as they say, with sticky state of its own (starting afresh)."""
    unset = load_config(graph.store, graph.session) is None
    return stored_engine(
        graph,
        policy=policy_named(policy, model) if policy or model or unset else None,
        budget=budget,
        state_dir=folder_of(graph.store, state_dir),
        state_key="what-if" if is_what_if(policy=policy, model=model, budget=budget) else None,
    )
