"""One way to open a store: a registry of URL schemes, each with its factory.

``open_store(target)`` takes what a user gives — a SQLite path, a URL, ``":memory:"``,
``None`` (``$OPENPROGRAM_DB`` or the default file) or a store — and asks the factory of
its scheme. ``memory`` and the SQL schemes (``sqlite``, ``postgresql``, ``postgres``,
``postgresql+psycopg``) are built in; :func:`register_store` adds another.

>>> open_store(":memory:").url
'memory:'
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from ._errors import StoreError
from ._sql import SQLStore
from ._store import MemoryStore, Store
from ._url import StoreURL

StoreFactory = Callable[..., Store]
"""Called with the URL (or path) and ``create``/``read_only`` keywords; returns a store."""

MEMORY = ":memory:"

_FACTORIES: dict[str, StoreFactory] = {}
_LOCK = threading.Lock()


def register_store(scheme: str, factory: StoreFactory) -> None:
    """Open URLs of ``scheme`` (the part before ``://``, or before ``:`` for ``memory:``)
    with ``factory``; registering a scheme again replaces its factory."""
    if not isinstance(scheme, str) or not scheme or not callable(factory):
        raise StoreError(f"register_store needs a scheme and a factory, not {scheme!r}")
    with _LOCK:
        _FACTORIES[scheme.lower()] = factory


def store_schemes() -> list[str]:
    """The schemes :func:`open_store` knows, sorted."""
    with _LOCK:
        return sorted(_FACTORIES)


def scheme_of(target: str) -> str:
    """The scheme a URL or path names: ``memory`` for ``":memory:"`` and ``memory:``, the
    part before ``://`` of a URL, ``sqlite`` for a file path."""
    return StoreURL.parse(target).scheme


def open_store(
    target: str | os.PathLike[str] | Store | None = None,
    *,
    create: bool = True,
    read_only: bool = False,
) -> Store:
    """The store ``target`` names (a store is returned as it is). ``create=False``: a
    database that does not exist is a ``StoreError`` and nothing is made; ``read_only``:
    nothing is written or migrated."""
    if isinstance(target, Store):
        return target
    if target is None:
        target = os.environ.get("OPENPROGRAM_DB") or None
    text = os.fspath(target) if target is not None else None
    scheme = scheme_of(text) if text is not None else "sqlite"
    with _LOCK:
        factory = _FACTORIES.get(scheme)
    if factory is None:
        known = ", ".join(store_schemes())
        raise StoreError(f"no store for {scheme}:// (known: {known}); see graph.register_store")
    return factory(text, create=create, read_only=read_only)


def _memory(_target: Any, **_options: Any) -> Store:
    return MemoryStore()


def _sql(target: str | None, *, create: bool = True, read_only: bool = False) -> Store:
    return SQLStore(target, create=create, read_only=read_only)


register_store("memory", _memory)
for _scheme in ("sqlite", "sqlite+pysqlite", "postgresql", "postgres", "postgresql+psycopg"):
    register_store(_scheme, _sql)
