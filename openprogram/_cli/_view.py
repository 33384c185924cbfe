"""``openprogram view``: the local web viewer (``pip install 'openprogram[view]'``)."""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from pathlib import Path
from urllib.parse import quote

from openprogram._cli._common import UsageError, busy, common_options, console, errors
from openprogram._errors import OpenProgramError
from openprogram._words import counted


def _loopback(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def cmd_view(args: argparse.Namespace) -> int:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as error:
        raise UsageError(
            f"the viewer needs {error.name}: pip install 'openprogram[view]'"
        ) from error
    from openprogram._view import Viewer, bind, export_html, folder_for, serve, url_of

    viewer = Viewer(getattr(args, "db", None), getattr(args, "state_dir", None),
                    allow_write=args.allow_write)  # fmt: skip
    if args.session is not None and not viewer.store.has_session(args.session):
        raise UsageError(
            f"no session {args.session!r} in {viewer.store.url}; `openprogram sessions` lists them"
        )
    if args.html:
        out = Path(args.html)
        if not out.parent.is_dir():
            raise OpenProgramError(
                f"--html {out}: there is no folder {out.parent}; create it first"
            )
        sessions = None if args.session is None else [args.session]
        written = export_html(viewer, out, sessions)
        folder = folder_for(out)
        size = out.stat().st_size + sum(p.stat().st_size for p in folder.iterdir())
        console.print(
            f"wrote {out} and {folder}{os.sep} ({counted(written, 'page')}, {size:,} bytes)"
        )
        return 0
    try:
        sock = bind(args.host, args.port)
    except OSError as error:
        raise OpenProgramError(busy(args.host, args.port, error)) from error
    host, port = sock.getsockname()[:2]
    token = secrets.token_urlsafe(24)
    path = "/" if args.session is None else f"/s/{quote(args.session, safe='')}"
    if not _loopback(host):
        errors.print(
            f"[yellow]warning:[/] listening on {host}, not loopback: whoever can reach it and "
            "holds the token reads every session"
        )
    url = f"{url_of(host, port)}{path}?token={token}"
    sys.stdout.write(url + "\n")
    sys.stdout.flush()
    if not args.no_open and not os.environ.get("CI"):
        import webbrowser

        webbrowser.open(url)
    serve(viewer, sock, token=token)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    view = sub.add_parser(
        "view",
        parents=[common_options()],
        help="a local web viewer of sessions, prompts, layers and records (or --html FILE)",
    )
    view.add_argument("session", nargs="?", help="open this session's page first")
    view.add_argument("--host", default="127.0.0.1", help="the address to listen on (loopback)")
    view.add_argument("--port", type=int, default=8765, help="the port (0: any free one)")
    view.add_argument("--no-open", action="store_true", help="print the URL, open no browser")
    view.add_argument(
        "--allow-write", action="store_true", help="allow rolling layers back from the page"
    )
    view.add_argument(
        "--html",
        metavar="OUT",
        help="write the pages as static files: OUT the session list, the rest in OUT_files/",
    )
    view.set_defaults(run=cmd_view)
