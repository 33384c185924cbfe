"""A store's address is parsed once: every family, and what opening one does with it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import graph
from graph import NoDatabase, StoreURL


@pytest.mark.parametrize(
    ("given_text", "scheme", "family", "file"),
    [
        (":memory:", "memory", "memory", None),
        ("memory:", "memory", "memory", None),
        ("agent.db", "sqlite", "sqlite", Path("agent.db")),
        ("runs/agent.db", "sqlite", "sqlite", Path("runs/agent.db")),
        ("sqlite:///runs/agent.db", "sqlite", "sqlite", Path("runs/agent.db")),
        ("sqlite:////abs/agent.db", "sqlite", "sqlite", Path("/abs/agent.db")),
        ("sqlite:////abs/agent.db?timeout=5", "sqlite", "sqlite", Path("/abs/agent.db")),
        (
            "sqlite:///file:/abs/agent.db?mode=ro&uri=true",
            "sqlite",
            "sqlite",
            Path("/abs/agent.db"),
        ),
        ("SQLite+pysqlite:////abs/a.db", "sqlite+pysqlite", "sqlite", Path("/abs/a.db")),
        ("sqlite://", "sqlite", "sqlite", None),
        ("sqlite:///:memory:", "sqlite", "sqlite", None),
        ("postgres://me@db/agents", "postgres", "postgresql", None),
        ("postgresql://me@db/agents", "postgresql", "postgresql", None),
        ("postgresql+psycopg://me@db/agents", "postgresql+psycopg", "postgresql", None),
        ("redis://cache/0", "redis", "other", None),
    ],
)
def test_every_family_parses_once(
    given_text: str, scheme: str, family: str, file: Path | None
) -> None:
    address = StoreURL.parse(given_text)
    assert (address.scheme, address.family, address.file) == (scheme, family, file)
    assert str(address) == given_text
    assert StoreURL.parse(address) is address


def test_postgres_gets_its_driver_and_the_rest_is_kept() -> None:
    assert StoreURL.parse("postgres://u:p@h:5/d?sslmode=require").connection() == (
        "postgresql+psycopg://u:p@h:5/d?sslmode=require"
    )
    assert StoreURL.parse("postgresql+psycopg://h/d").connection() == "postgresql+psycopg://h/d"


def test_a_plain_path_is_made_absolute_and_its_folder_made(tmp_path: Path) -> None:
    target = tmp_path / "new" / "agent.db"
    assert StoreURL.parse(target).connection() == f"sqlite:///{target}"
    assert target.parent.is_dir() and not target.exists()


def test_a_reader_never_creates(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "agent.db"
    with pytest.raises(NoDatabase, match=r"agent\.db"):
        StoreURL.parse(missing).connection(create=False)
    with pytest.raises(NoDatabase, match=r"agent\.db"):
        StoreURL.parse(f"sqlite:///{missing}?timeout=5").connection(create=False)
    assert not missing.parent.exists()


def test_read_only_goes_through_sqlites_own_mode(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    assert StoreURL.parse(url).read_only() == f"sqlite:///file:{tmp_path / 'a.db'}?mode=ro&uri=true"
    assert StoreURL.parse("sqlite:///:memory:").read_only() == "sqlite:///:memory:"
    assert StoreURL.parse("postgresql+psycopg://h/d").read_only() == "postgresql+psycopg://h/d"


def test_the_registry_opens_by_the_parsed_scheme(tmp_path: Path) -> None:
    opened: list[str] = []

    def factory(target: str, **_options: object) -> graph.Store:
        opened.append(target)
        return graph.MemoryStore()

    graph.register_store("Test-Url", factory)
    assert isinstance(graph.open_store("TEST-URL://x"), graph.MemoryStore)
    assert opened == ["TEST-URL://x"]
    store = graph.open_store(tmp_path / "a.db")
    try:
        assert StoreURL.parse(store.url).file == tmp_path / "a.db"
    finally:
        graph.dispose_engines()


@given(st.text(alphabet=st.characters(blacklist_characters="\x00?"), min_size=1))
def test_a_sqlite_url_names_the_file_its_path_names(name: str) -> None:
    address = StoreURL.parse(f"sqlite:////{name}")
    assert address.family == "sqlite"
    assert address.file == Path("/" + name)
