"""Session-wide test setup: no real network, a throwaway PostgreSQL, a fake LLM provider.

Helpers live in ``tests/_*.py``. ``tests`` is not a package: under pytest's default
``prepend`` import mode this file's directory is put on ``sys.path``, so they import as
top-level modules (``from _postgres import ...``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS"] = "True"

import _netguard
import _postgres
import pytest
from _fake_provider import FakeProvider

PG_URL_ENV = "OPENPROGRAM_TEST_PG_URL"


def pytest_configure(config: pytest.Config) -> None:
    _netguard.install()


def pytest_unconfigure(config: pytest.Config) -> None:
    _netguard.uninstall()


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """URL of a fresh database in a session-wide PostgreSQL 15 cluster.

    ``$OPENPROGRAM_TEST_PG_URL`` is used as-is when set. If the cluster cannot start the
    test is skipped, except under ``CI=true`` where it fails with the tools' output.
    """
    external = os.environ.get(PG_URL_ENV)
    if external:
        yield external
        return
    try:
        cluster = _postgres.start_cluster()
    except _postgres.PgStartError as exc:
        error = str(exc)
    else:
        error = ""
    if error:
        reason = f"cannot start PostgreSQL:\n{error}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    try:
        yield _postgres.create_database(cluster.url(), prefix="op_session")
    finally:
        _postgres.stop_cluster(cluster)


@pytest.fixture
def pg_db_url(pg_url: str) -> Iterator[str]:
    """URL of a database created for this test alone (dropped afterwards)."""
    url = _postgres.create_database(pg_url)
    try:
        yield url
    finally:
        _postgres.drop_database(pg_url, url)


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store URL: SQLite in ``tmp_path`` or a per-test PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/op.db"
    url: str = request.getfixturevalue("pg_db_url")
    return url


@pytest.fixture
def fake_provider() -> Iterator[FakeProvider]:
    """A scripted OpenAI/Anthropic-compatible server on 127.0.0.1 (see ``_fake_provider``)."""
    provider = FakeProvider()
    try:
        yield provider
    finally:
        provider.close()


@pytest.fixture(autouse=True)
def _close_cached_engines() -> Iterator[None]:
    """Engines are cached per URL; close their pooled connections after every test."""
    yield
    import graph

    graph.dispose_engines()


@pytest.fixture(autouse=True, scope="session")
def _close_stray_event_loops() -> Iterator[None]:
    """litellm leaves private event loops behind; close them before pytest's final gc."""
    yield
    import asyncio
    import gc

    for item in gc.get_objects():
        is_loop = isinstance(item, asyncio.AbstractEventLoop)
        if is_loop and not item.is_running() and not item.is_closed():
            item.close()


@pytest.fixture
def switch_often() -> Iterator[None]:
    """Threads switch every 10 µs (not 5 ms), so their steps interleave finely (the
    thread tests ask for it)."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
