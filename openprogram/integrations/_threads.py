"""One session per conversation of a framework (a LangChain thread, a Pydantic AI
conversation) through one adapter object.

The first conversation an adapter sees is stored in the session it was given; each other
one gets a session of its own in the same database (``<session>.<conversation>``,
configured as the first: policy, budget, model, summarizer, state folder, redaction), so
two threads through one middleware never fork each other's history or compact each
other's rounds. Which conversation holds the given session is stored, so another process
maps them alike; a call that names no conversation goes to the given session.
"""

from __future__ import annotations

import hashlib
import threading

from graph import is_safe_id
from openprogram._runtime._session import Session
from openprogram.integrations._mirror import Mirror

__all__ = ["Conversations"]

CLAIMS = "integrations.conversations"
"""Store side-data namespace: per adapter name, the conversation the given session holds."""


class Conversations:
    """The mirror (and so the session) of each conversation through one adapter."""

    def __init__(self, session: Session, name: str) -> None:
        self.session = session
        self.name = name
        self.mirror = Mirror(session, name)
        """The given session's mirror (read ahead: see ``Mirror.warm``)."""
        self.mirror.warm()
        self._mirrors: dict[str, Mirror] = {}
        self._owner: str | None = None
        self._lock = threading.Lock()

    @property
    def sessions(self) -> dict[str, Session]:
        """The session of each conversation seen so far (the given one included)."""
        with self._lock:
            return {key: mirror.session for key, mirror in self._mirrors.items()}

    def session_for(self, conversation: str | None) -> Session:
        return self.mirror_for(conversation).session

    def mirror_for(self, conversation: str | None) -> Mirror:
        if conversation is None:
            return self.mirror
        with self._lock:
            found = self._mirrors.get(conversation)
            if found is not None:
                return found
            if self._claim(conversation):
                found = self.mirror
            else:
                found = Mirror(self._open(conversation), self.name)
            self._mirrors[conversation] = found
            return found

    def _claim(self, conversation: str) -> bool:
        """Whether ``conversation`` holds the given session (the first one seen does)."""
        if self._owner is None:
            store, session = self.session.store, self.session.id
            self._owner = store.get_values(session, CLAIMS, [self.name]).get(self.name)
            if self._owner is None:
                store.put_values(session, CLAIMS, {self.name: conversation})
                self._owner = conversation
        return self._owner == conversation

    def _open(self, conversation: str) -> Session:
        base = self.session
        part = conversation if is_safe_id(conversation) and len(conversation) <= 64 else None
        if part is None:
            part = "c" + hashlib.sha256(conversation.encode()).hexdigest()[:16]
        opened = Session(
            base.store,
            f"{base.id}.{part}"[:128],
            model=base.model,
            policy=base.config.make_policy(),
            summarizer=base.summarizer,
            budget=base.config.budget,
            state_dir=base.folder.path,
            redact=base.graph.redactor if base.graph.redactor is not None else False,
        )
        opened.store.update_session_meta(opened.id, {"conversation": conversation})
        return opened
