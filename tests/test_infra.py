"""The test infrastructure itself: network guard, PostgreSQL fixtures, fake provider."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from _fake_provider import FakeProvider
from sqlalchemy import create_engine, make_url, text


def test_network_guard_blocks_non_loopback() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        with pytest.raises(RuntimeError, match="tests must not reach the network"):
            sock.connect(("10.255.255.1", 9))
        with pytest.raises(RuntimeError, match="tests must not reach the network"):
            sock.connect_ex(("10.255.255.1", 9))
    with pytest.raises(RuntimeError, match="tests must not reach the network"):
        socket.create_connection(("example.com", 443), timeout=1)


def test_network_guard_allows_loopback(fake_provider: FakeProvider) -> None:
    with socket.create_connection(("127.0.0.1", fake_provider.port), timeout=5):
        pass
    with socket.create_connection(("localhost", fake_provider.port), timeout=5):
        pass


@pytest.mark.postgres
def test_pg_url_is_postgres_15(pg_url: str) -> None:
    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            version = conn.execute(text("SELECT version()")).scalar_one()
    finally:
        engine.dispose()
    assert version.startswith("PostgreSQL 15")


@pytest.mark.postgres
def test_pg_db_url_is_a_fresh_database(pg_url: str, pg_db_url: str) -> None:
    assert make_url(pg_db_url).database != make_url(pg_url).database
    engine = create_engine(pg_db_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE t (x int)"))
            conn.execute(text("INSERT INTO t VALUES (1)"))
            assert conn.execute(text("SELECT count(*) FROM t")).scalar_one() == 1
    finally:
        engine.dispose()


def test_store_url(store_url: str, tmp_path: Path) -> None:
    engine = create_engine(store_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar_one() == 1
    finally:
        engine.dispose()
    if store_url.startswith("sqlite"):
        assert (tmp_path / "op.db").exists()
    else:
        assert make_url(store_url).get_backend_name() == "postgresql"


def test_litellm_openai_reply(fake_provider: FakeProvider) -> None:
    import litellm

    fake_provider.reply("hello there", prompt_tokens=42)
    response = litellm.completion(
        model="openai/gpt-4o",
        api_base=fake_provider.base_url,
        api_key="x",
        messages=[{"role": "user", "content": "hi"}],
    )
    assert response.choices[0].message.content == "hello there"
    assert response.usage.prompt_tokens == 42
    (request,) = fake_provider.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["messages"] == [{"role": "user", "content": "hi"}]
    assert request.headers["authorization"] == "Bearer x"


def test_litellm_openai_default_and_tool_call(fake_provider: FakeProvider) -> None:
    import litellm

    fake_provider.reply_tool_call("lookup", '{"q": "x"}')
    kwargs = {
        "model": "openai/gpt-4o",
        "api_base": fake_provider.base_url,
        "api_key": "x",
        "messages": [{"role": "user", "content": "hi"}],
    }
    first = litellm.completion(**kwargs)
    (call,) = first.choices[0].message.tool_calls
    assert call.function.name == "lookup"
    assert json.loads(call.function.arguments) == {"q": "x"}
    second = litellm.completion(**kwargs)
    assert second.choices[0].message.content == "ok"
    assert len(fake_provider.requests) == 2


def test_litellm_openai_overflow(fake_provider: FakeProvider) -> None:
    import litellm
    from litellm.exceptions import ContextWindowExceededError

    fake_provider.overflow()
    with pytest.raises(ContextWindowExceededError):
        litellm.completion(
            model="openai/gpt-4o",
            api_base=fake_provider.base_url,
            api_key="x",
            messages=[{"role": "user", "content": "hi"}],
        )


def test_litellm_openai_status(fake_provider: FakeProvider) -> None:
    import litellm
    from litellm.exceptions import APIError

    fake_provider.status(413, {"error": {"message": "request too large", "type": "too_large"}})
    with pytest.raises(APIError) as excinfo:
        litellm.completion(
            model="openai/gpt-4o",
            api_base=fake_provider.base_url,
            api_key="x",
            messages=[{"role": "user", "content": "hi"}],
            max_retries=0,
        )
    assert excinfo.value.status_code == 413


def test_litellm_anthropic(fake_provider: FakeProvider) -> None:
    import litellm
    from litellm.exceptions import ContextWindowExceededError

    fake_provider.reply("bonjour", prompt_tokens=7)
    fake_provider.reply_tool_call("lookup", '{"q": "y"}')
    fake_provider.overflow()
    kwargs = {
        "model": "anthropic/claude-sonnet-4-5",
        "api_base": fake_provider.anthropic_base_url,
        "api_key": "x",
        "messages": [{"role": "user", "content": "hi"}],
    }
    response = litellm.completion(**kwargs)
    assert response.choices[0].message.content == "bonjour"
    assert response.usage.prompt_tokens == 7
    tool = litellm.completion(**kwargs)
    (call,) = tool.choices[0].message.tool_calls
    assert call.function.name == "lookup"
    assert json.loads(call.function.arguments) == {"q": "y"}
    with pytest.raises(ContextWindowExceededError):
        litellm.completion(**kwargs)
    assert [r.path for r in fake_provider.requests] == ["/v1/messages"] * 3
    assert fake_provider.requests[0].body["messages"][0]["role"] == "user"


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_litellm_several_tool_calls_in_one_reply(fake_provider: FakeProvider, wire: str) -> None:
    import litellm

    fake_provider.reply_tool_calls([("lookup", '{"q": "a"}'), ("grep", '{"p": "b"}')])
    model, base = (
        ("openai/gpt-4o", fake_provider.base_url)
        if wire == "openai"
        else ("anthropic/claude-sonnet-4-5", fake_provider.anthropic_base_url)
    )
    response = litellm.completion(
        model=model, api_base=base, api_key="x", messages=[{"role": "user", "content": "hi"}]
    )
    calls = response.choices[0].message.tool_calls
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("lookup", {"q": "a"}),
        ("grep", {"p": "b"}),
    ]
    assert len({c.id for c in calls}) == 2


def test_litellm_sync_then_async(fake_provider: FakeProvider) -> None:
    """A sync litellm call leaves an unclosed event loop set in the main thread.

    ``asyncio.run`` later replaces it, and collecting it emits ``ResourceWarning:
    unclosed event loop``; pyproject ignores exactly that warning.
    """
    import asyncio
    import gc

    import litellm

    kwargs = {
        "model": "openai/gpt-4o",
        "api_base": fake_provider.base_url,
        "api_key": "x",
        "messages": [{"role": "user", "content": "hi"}],
    }
    fake_provider.reply("sync hello")
    fake_provider.reply("async hello")
    assert litellm.completion(**kwargs).choices[0].message.content == "sync hello"

    async def call() -> str:
        response = await litellm.acompletion(**kwargs)
        content: str = response.choices[0].message.content
        return content

    assert asyncio.run(call()) == "async hello"
    gc.collect()
    assert [r.path for r in fake_provider.requests] == ["/v1/chat/completions"] * 2
