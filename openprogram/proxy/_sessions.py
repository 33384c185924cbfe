"""Which conversation a request belongs to, and which requests are side calls.

A client that names its session (``X-OpenProgram-Session``) gets that session. Claude Code
sends its own session id (the ``X-Claude-Code-Session-Id`` header, and ``metadata.user_id``:
a JSON string with ``session_id`` in current versions, ``user_…_session_<uuid>`` in older
ones), but its subagents share that id, so a conversation is the id together with a
fingerprint of what never changes in it: the system prompt and the first user message. A
client that sends neither is keyed by the fingerprint alone. The session id is derived from
the key, so a restarted proxy finds the same sessions in its database.

Claude Code's side calls (a title on the small model, a quota probe) share the session id
but carry no tools: they go upstream untouched, with a record, and never enter a session.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from graph import is_safe_id

__all__ = ["Conversation", "client_session", "recognise", "side_call"]

NAMED = "x-openprogram-session"
CLAUDE_CODE = "x-claude-code-session-id"
_LEGACY = re.compile(r"_session_([0-9A-Za-z-]{8,})")
SIDE_MODELS = ("haiku",)
"""Models a Claude Code call on which is a side call (titles, summaries of its own)."""


@dataclass(frozen=True)
class Conversation:
    """A request's conversation: the session id it is stored under, the key it was
    recognised by (``named``, ``client`` or ``fingerprint``) and the client's own id."""

    session: str
    by: str
    client_id: str | None


def client_session(headers: Mapping[str, str], body: Mapping[str, object]) -> str | None:
    """Claude Code's session id: the header, else ``metadata.user_id`` (JSON with
    ``session_id``, or the older ``user_…_session_<uuid>``)."""
    given = headers.get(CLAUDE_CODE)
    if given:
        return given.strip()
    metadata = body.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
    if not isinstance(user_id, str) or not user_id:
        return None
    try:
        parsed = json.loads(user_id)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("session_id"), str):
        return str(parsed["session_id"])
    match = _LEGACY.search(user_id)
    return match.group(1) if match else None


def recognise(
    headers: Mapping[str, str], body: Mapping[str, object], system: str, first_user: str
) -> Conversation:
    """The conversation of a request (see the module docstring)."""
    named = headers.get(NAMED)
    if named:
        named = named.strip()
        session = named if is_safe_id(named) else f"proxy-{_digest(named)}"
        return Conversation(session, "named", named)
    fingerprint = _digest(f"{system}\x00{first_user}")
    client = client_session(headers, body)
    if client:
        return Conversation(f"proxy-{_digest(f'{client}:{fingerprint}')}", "client", client)
    return Conversation(f"proxy-{fingerprint}", "fingerprint", None)


def side_call(headers: Mapping[str, str], body: Mapping[str, object]) -> str | None:
    """Why a Claude Code request is a side call (None: it is a conversation's turn)."""
    if headers.get(NAMED) or client_session(headers, body) is None:
        return None
    if not body.get("tools"):
        return "side call: no tools"
    model = str(body.get("model") or "").lower()
    if any(name in model for name in SIDE_MODELS):
        return f"side call: small model {body.get('model')}"
    return None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:24]
