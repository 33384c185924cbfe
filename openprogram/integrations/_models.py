"""The model a framework runs, recorded in the session it runs in.

A framework picks its model itself; the session only sees the requests. So an adapter
names the model of each request, and the first one (or a different one) becomes the
session's configuration through :meth:`Session.configure`: stored and recorded as a
configuration event, with the window and output limit litellm's model map gives it (when
the map knows it) and so the tokenizer the budget counts with. ``openprogram configure``
then shows what the agent runs on, not the 128k default."""

from __future__ import annotations

from openprogram._runtime._session import Session

__all__ = ["record_model"]


def record_model(session: Session, name: str | None) -> bool:
    """Make ``name`` the session's recorded model when it is not already (an explicit,
    recorded change, as ``configure`` writes it); True when it changed. ``None`` or an
    empty name (a framework model that names none) changes nothing."""
    if not name or session.config.model == name:
        return False
    session._follow_config()  # another process may have recorded it already
    if session.config.model == name:
        return False
    return bool(session.configure(model=name))
