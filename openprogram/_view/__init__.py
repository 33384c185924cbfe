"""``openprogram view``: a local web app over a database's sessions (``openprogram[view]``).

Sessions, each session's timeline of LLM calls, a call's prompt as sent, layers before
and after (and their rollback, with ``--allow-write``), the function tree, compaction
records and full-text search; pages update in place while an agent writes. ``--html``
writes the same views to one self-contained file instead.
"""

from __future__ import annotations

import secrets
import socket
from typing import Any

from openprogram._view._data import Viewer
from openprogram._view._export import export_html, folder_for

__all__ = ["Viewer", "bind", "export_html", "folder_for", "serve", "url_of"]


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (``port`` 0: a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()  # a busy port: the socket is not left to the garbage collector
        raise
    sock.set_inheritable(True)
    return sock


def url_of(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def hosts_for(host: str, port: int) -> set[str]:
    """The ``Host`` headers this server answers to; any other is refused (DNS rebinding)."""
    names = {"127.0.0.1", "localhost", "[::1]"}
    names.add(f"[{host}]" if ":" in host else host)
    found = {f"{name}:{port}" for name in names}
    if host in ("0.0.0.0", "::"):
        found.add("*")  # any IP literal of this machine; names are still refused
    return found


def serve(viewer: Viewer, sock: socket.socket, *, token: str | None = None) -> Any:
    """Serve the app on ``sock`` until interrupted (uvicorn); returns when it stops."""
    import uvicorn

    from openprogram._view._app import COOKIE, create_app

    host, port = sock.getsockname()[:2]
    token = token or secrets.token_urlsafe(24)
    app = create_app(viewer, token=token, hosts=hosts_for(host, port), cookie=f"{COOKIE}_{port}")
    config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    server.run(sockets=[sock])
    return server
