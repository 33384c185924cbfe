"""``openprogram proxy``: any Anthropic or OpenAI client (Messages, Chat Completions,
Responses) behind a local base URL gets the context engine with no code change
(``pip install 'openprogram[proxy]'``).

Each conversation is a session; each request goes upstream as the session's render under
its budget (the client's own blocks where compaction left them alone), and the answer
comes back unchanged (one answer when the proxy answered a history tool the model called
on the way). Anything that fails in the engine sends the request as it came, with
a record. Provider keys are forwarded, never stored.

    proxy = Proxy(ProxyConfig(db="proxy.db", budget=32_000))
    sock = bind("127.0.0.1", 0)
    serve(proxy, sock, token="…")  # ANTHROPIC_BASE_URL=http://127.0.0.1:P/…
"""

from __future__ import annotations

import secrets
import socket
from typing import TYPE_CHECKING

from openprogram._view import bind, hosts_for, url_of
from openprogram.proxy._app import create_app, env_lines
from openprogram.proxy._proxy import Prepared, Proxy, ProxyConfig

if TYPE_CHECKING:  # imported when a server is made (it is slow to import)
    import uvicorn

__all__ = [
    "Prepared",
    "Proxy",
    "ProxyConfig",
    "bind",
    "create_app",
    "env_lines",
    "hosts_for",
    "serve",
    "server",
    "url_of",
]


def server(proxy: Proxy, sock: socket.socket, *, token: str | None = None) -> uvicorn.Server:
    """A uvicorn server for ``proxy`` on ``sock`` (not started: ``server.run(sockets=[sock])``
    runs it until it is stopped, e.g. from another thread by ``server.should_exit = True``)."""
    import uvicorn

    host, port = sock.getsockname()[:2]
    app = create_app(proxy, token=token or secrets.token_urlsafe(24), hosts=hosts_for(host, port))
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    return uvicorn.Server(config)


def serve(proxy: Proxy, sock: socket.socket, *, token: str | None = None) -> None:
    """Serve ``proxy`` on ``sock`` until interrupted."""
    server(proxy, sock, token=token).run(sockets=[sock])
