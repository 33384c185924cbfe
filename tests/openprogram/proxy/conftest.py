"""Fixtures: a scripted upstream on 127.0.0.1 and a proxy in front of it (both uvicorn, in
threads of the test process)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _scripted_upstream import ScriptedUpstream, start_server, stop_server

from openprogram.proxy import Proxy, ProxyConfig, bind, create_app, env_lines, hosts_for


@dataclass
class Running:
    proxy: Proxy
    upstream: ScriptedUpstream
    url: str
    token: str
    db: Path

    @property
    def anthropic_base(self) -> str:
        return env_lines(self.url, self.token)[0].split("=", 1)[1]

    @property
    def openai_base(self) -> str:
        return env_lines(self.url, self.token)[1].split("=", 1)[1]


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    server = ScriptedUpstream().start()
    yield server
    server.stop()


def start_proxy(upstream: ScriptedUpstream, db: Path, **options: object) -> tuple[Running, object]:
    summarizer = options.pop("summarizer", None)
    config = ProxyConfig(db=str(db), upstream_anthropic=upstream.url,
                         upstream_openai=upstream.url, **options)  # type: ignore[arg-type]  # fmt: skip
    proxy = Proxy(config, summarizer=summarizer)  # type: ignore[arg-type]
    token = secrets.token_urlsafe(16)
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    app = create_app(proxy, token=token, hosts=hosts_for("127.0.0.1", port))
    server, thread, port = start_server(app, sock)
    return Running(proxy, upstream, f"http://127.0.0.1:{port}", token, db), (server, thread)


@pytest.fixture
def running(upstream: ScriptedUpstream, tmp_path: Path) -> Iterator[Running]:
    run, handle = start_proxy(upstream, tmp_path / "proxy.db", budget=4_000)
    yield run
    stop_server(*handle)  # type: ignore[misc]
    run.proxy.close()
