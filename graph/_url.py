"""A store's address, parsed once: what a user gives (a path, a URL, ``":memory:"``) as a value.

Every part of the project that asks "is this SQLite, which file, which scheme opens it"
asks a :class:`StoreURL` instead of looking at the text again, as httpx parses a ``URL``
once. Parsing touches no file; only :meth:`StoreURL.connection` may make a folder.

>>> StoreURL.parse("runs/agent.db").file
PosixPath('runs/agent.db')
>>> StoreURL.parse("postgres://me@db/agents").connection()
'postgresql+psycopg://me@db/agents'
>>> StoreURL.parse(":memory:").family
'memory'
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ._errors import NoDatabase

Family = Literal["memory", "sqlite", "postgresql", "other"]

_MEMORY_TEXTS = (":memory:", "memory:")
_SQLITE_MEMORY_PATHS = ("", ":memory:")
_POSTGRES_ALIASES = ("postgres", "postgresql")


@dataclass(frozen=True)
class StoreURL:
    """``text`` as given; ``scheme`` the registry's key (the part before ``://``, lower
    case; ``sqlite`` for a plain path, ``memory`` for ``":memory:"``); ``path`` a SQLite
    URL's or plain path's file part, without its query (None for other families)."""

    text: str
    scheme: str
    path: str | None = None
    query: str = ""

    @classmethod
    def parse(cls, target: str | os.PathLike[str]) -> StoreURL:
        """The address ``target`` names; a :class:`StoreURL` is returned as it is."""
        if isinstance(target, StoreURL):
            return target
        text = os.fspath(target)
        if text in _MEMORY_TEXTS:
            return cls(text, "memory")
        if "://" not in text:
            return cls(text, "sqlite", str(Path(text).expanduser()))
        scheme, rest = text.split("://", 1)
        scheme = scheme.lower()
        if not scheme.startswith("sqlite"):
            return cls(text, scheme)
        path, _, query = rest.removeprefix("/").partition("?")
        if path.startswith("file:") and "uri=true" in query.split("&"):
            path = path.removeprefix("file:")
        return cls(text, scheme, path, query)

    @property
    def family(self) -> Family:
        """Which kind of database: the engines, the state folder and the bench branch on it."""
        if self.scheme == "memory":
            return "memory"
        if self.scheme.startswith("sqlite"):
            return "sqlite"
        if self.scheme.split("+", 1)[0] in _POSTGRES_ALIASES:
            return "postgresql"
        return "other"

    @property
    def in_memory(self) -> bool:
        """An in-process store (``memory:``, or SQLite's ``:memory:``): nothing on disk."""
        return self.family == "memory" or (
            self.family == "sqlite" and self.path in _SQLITE_MEMORY_PATHS
        )

    @property
    def file(self) -> Path | None:
        """The SQLite database file this address names (None: not a SQLite file)."""
        if self.family != "sqlite" or self.in_memory or self.path is None:
            return None
        return Path(self.path)

    def connection(self, *, create: bool = True) -> str:
        """The SQLAlchemy URL to connect with: a plain path made absolute (its folder made
        unless ``create=False``), ``postgres://`` given its driver. ``create=False``: a
        SQLite file that does not exist is a :class:`NoDatabase`, and nothing is made."""
        if self.family == "postgresql" and self.scheme in _POSTGRES_ALIASES:
            return "postgresql+psycopg://" + self.text.split("://", 1)[1]
        if "://" in self.text or self.family == "memory":
            file = self.file
            if not create and file is not None and not file.exists():
                raise NoDatabase(str(file))
            return self.text
        path = Path(self.text).expanduser().resolve()
        if not create:
            if not path.is_file():
                raise NoDatabase(str(path))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{path}"

    def read_only(self) -> str:
        """The URL that opens this address for reading only: a SQLite file through SQLite's
        own ``mode=ro``; other databases as they are (made read-only per connection)."""
        file = self.file
        if file is None or "://" not in self.text:
            return self.text
        return f"sqlite:///file:{file}?mode=ro&uri=true"

    def __str__(self) -> str:
        return self.text
