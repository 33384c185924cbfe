"""The viewer's ASGI app (Starlette): routes, and the checks every request passes.

As Jupyter does, every request needs the random token of the printed URL: ``?token=``
once, then a cookie (``HttpOnly``, ``SameSite=Strict``). The ``Host`` header must name
this server (a DNS-rebinding page gets a 403), writes need ``--allow-write`` and a
same-origin POST carrying the CSRF token, and a Content-Security-Policy lets only the
page's own nonce-tagged script run, so even a stored ``<script>`` could not.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from context import AlreadyRolledBack, CommitConflict, ContextError, UnknownLayer
from openprogram._view import _layer_pages as layer_pages
from openprogram._view import _pages as pages
from openprogram._view._data import Viewer
from openprogram._view._svg import figure

COOKIE = "openprogram_view"
DETAILED_NODES = 20_000
"""Up to this many nodes a timeline page stacks each call by kind at once (rendering the
page's calls again); a longer session's first page shows the receipts' totals and links
to the stacked chart, so it opens without loading the graph."""
Scope = MutableMapping[str, Any]
ASGI = Callable[[Scope, Any, Any], Awaitable[None]]

LIVE = """
(function(){
  const main=document.getElementById('main'); const url=main.dataset.version;
  if(!url) return; let seen=null;
  async function poll(){
    try{
      const v=await (await fetch(url,{credentials:'same-origin'})).text();
      if(seen!==null && v!==seen){
        const html=await (await fetch(location.href,{credentials:'same-origin'})).text();
        const doc=new DOMParser().parseFromString(html,'text/html');
        const fresh=doc.getElementById('main'); if(fresh){main.innerHTML=fresh.innerHTML;}
        main.dataset.updated=String(Number(main.dataset.updated||0)+1);
      }
      seen=v;
    }catch(e){}
    setTimeout(poll, 1000);
  }
  poll();
})();
"""
"""Live updates by polling: when the session's version changes, the page's main part is
fetched again and swapped in place (the scroll position and the URL stay)."""


def host_allowed(host: str, hosts: set[str]) -> bool:
    """Whether a request's ``Host`` header names this server (``hosts``, from
    ``hosts_for``): any other is refused, so a DNS-rebinding page cannot reach it."""
    if host in hosts:
        return True
    name = host.rsplit(":", 1)[0].strip("[]")
    try:  # a bare IP literal cannot be rebound by DNS
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return "*" in hosts


class Guard:
    """The checks of every request (see the module): token or cookie, Host, CSRF."""

    def __init__(self, app: ASGI, *, token: str, hosts: set[str], cookie: str = COOKIE):
        self.app = app
        self.cookie = cookie
        self.token = token
        self.hosts = hosts
        self.csrf = hmac.new(token.encode(), b"csrf", "sha256").hexdigest()

    def host_ok(self, host: str) -> bool:
        return host_allowed(host, self.hosts)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if not self.host_ok(request.headers.get("host", "")):
            await PlainTextResponse("unknown Host header", 403)(scope, receive, send)
            return
        given = request.query_params.get("token")
        if given is not None and hmac.compare_digest(given, self.token):
            query = urlencode([(k, v) for k, v in parse_qsl(scope["query_string"].decode())
                               if k != "token"])  # fmt: skip
            response = Response(status_code=303, headers={
                "location": scope["path"] + (f"?{query}" if query else "")})  # fmt: skip
            response.set_cookie(self.cookie, self.token, httponly=True, samesite="strict")
            await response(scope, receive, send)
            return
        cookie = request.cookies.get(self.cookie, "")
        if not hmac.compare_digest(cookie, self.token):
            await PlainTextResponse(
                "a token is needed: open the URL `openprogram view` printed", 403
            )(scope, receive, send)
            return
        if request.method not in ("GET", "HEAD"):
            origin = request.headers.get("origin")
            site = request.headers.get("sec-fetch-site", "same-origin")
            own = {f"http://{h}" for h in self.hosts}
            if site not in ("same-origin", "none") or (origin is not None and origin not in own):
                await PlainTextResponse("cross-origin write refused", 403)(scope, receive, send)
                return
        scope.setdefault("state", {})["csrf"] = self.csrf
        await self.app(scope, receive, send)


def create_app(
    viewer: Viewer, *, token: str, hosts: set[str], cookie: str = COOKIE, live: bool = True
) -> Guard:
    """The app, wrapped in its :class:`Guard` (``cookie``: the cookie's name; cookies do
    not tell ports apart, so each server names its own)."""
    links = pages.Links()

    def html(
        request: Request, title: str, body: str, *, version: str = "", status: int = 200
    ) -> HTMLResponse:
        nonce = secrets.token_urlsafe(12)
        if version and live:
            page = pages.document(title, body, script=LIVE, nonce=nonce, version=version)
        else:
            page = pages.document(title, body)
        return HTMLResponse(
            page,
            status,
            headers={
                "content-security-policy": (
                    f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline';"
                    " img-src 'self' data:; connect-src 'self'; form-action 'self';"
                    " frame-ancestors 'none'; base-uri 'none'"
                ),
                "x-content-type-options": "nosniff",
                "referrer-policy": "same-origin",
                "cache-control": "no-store",
            },
        )

    def missing(text: str) -> HTMLResponse:
        return HTMLResponse(pages.document("not found", f"<p>{pages.e(text)}</p>"), 404)

    async def index(request: Request) -> Response:
        query = request.query_params.get("q", "")
        rows = await run_in_threadpool(viewer.sessions, query)
        body = pages.sessions_page(rows, links, query=query, url=viewer.store.url)
        return html(request, "sessions", body, version="/version")

    async def all_versions(request: Request) -> Response:
        infos = await run_in_threadpool(viewer.store.sessions)
        return PlainTextResponse(";".join(f"{i.id}:{i.nodes}" for i in infos))

    def sid(request: Request) -> str:
        session = str(request.path_params["session"])
        if not viewer.store.has_session(session):
            raise KeyError(f"no session {session}")
        return session

    def view(
        build: Callable[[Request, str], str],
        *,
        live_view: bool = True,
        then: Callable[[str], None] | None = None,
    ) -> Callable[[Request], Awaitable[Response]]:
        """An endpoint serving ``build``'s page; ``then``: run with the session once the
        page is sent."""

        async def endpoint(request: Request) -> Response:
            try:
                session = await run_in_threadpool(sid, request)
                body = await run_in_threadpool(build, request, session)
            except KeyError as error:
                return missing(str(error.args[0] if error.args else error))
            version = links.session(session, "version") if live_view else ""
            response = html(request, session, body, version=version)
            if then is not None:
                response.background = BackgroundTask(then, session)
            return response

        return endpoint

    def page_of(request: Request, total: int) -> int:
        """The ``?page=`` asked for; one past the last (or not a number) is not found."""
        raw = request.query_params.get("page", "0")
        last = max(0, -(-total // pages.PAGE) - 1)
        if not raw.isdigit() or int(raw) > last:
            raise KeyError(f"no page {raw!r}: pages go from 0 to {last}")
        return int(raw)

    def timeline(request: Request, session: str) -> str:
        page = page_of(request, len(viewer.receipts(session)))
        kinds = request.query_params.get("kinds") == "1"
        info = next(i for i in viewer.store.sessions() if i.id == session)
        kinds = kinds or info.nodes <= DETAILED_NODES
        calls, total = viewer.calls(session, page, pages.PAGE, kinds=kinds)
        records = viewer.records(session)
        summary = (
            f"{figure(info.nodes)} nodes, {figure(total)} LLM calls, "
            f"{figure(len(records))} compaction records"
        )
        hint = "" if total else pages.replay_hint(session, viewer.store.url, links)
        return pages.timeline_page(session, calls, total, page, links, summary=summary + hint)

    def prompt(request: Request, session: str) -> str:
        receipt_id = request.path_params.get("receipt")
        found = viewer.prompt(session, receipt_id)
        ids = [r.id for r in viewer.receipts(session)]
        number = -1 if found.receipt is None else ids.index(found.receipt.id)
        return pages.prompt_page(session, found, number, links)

    def layers(request: Request, session: str) -> str:
        return layer_pages.layers_page(session, viewer.layers(session), links)

    def layer(request: Request, session: str) -> str:
        layer_id = viewer.stored_id(session, str(request.path_params["layer"]))
        if layer_id not in {x.id for x in viewer.layers(session)}:
            raise KeyError(f"no layer {layer_id} in session {session}")
        confirm = None
        if request.query_params.get("confirm") == "1":
            confirm = viewer.takes_with_it(session, layer_id)
        raw = request.query_params.get("page", "0")
        if not raw.isdigit():
            raise KeyError(f"no page {raw!r} of layer {layer_id}")
        return layer_pages.layer_page(
            session,
            viewer.layer(session, layer_id, int(raw), pages.PAGE),
            links,
            writable=viewer.allow_write,
            confirm=confirm,
            csrf=request.scope["state"]["csrf"],
        )

    async def rollback(request: Request) -> Response:
        if not viewer.allow_write:
            return PlainTextResponse("read-only: start the viewer with --allow-write", 403)
        form = await request.form()
        csrf = str(form.get("csrf", ""))
        if not hmac.compare_digest(csrf, request.scope["state"]["csrf"]):
            return PlainTextResponse("missing or wrong CSRF token", 403)
        session = str(request.path_params["session"])
        layer_id = str(request.path_params["layer"])  # an id or a handle (L3)
        try:
            await run_in_threadpool(viewer.rollback, session, layer_id)
        except (AlreadyRolledBack, CommitConflict) as error:
            body = f"<div class='warn' id='conflict'>rollback refused: {pages.e(error)}</div>"
            return html(request, session, body, status=409)
        except (UnknownLayer, KeyError) as error:
            return missing(f"rollback failed: {error}")
        except ContextError as error:
            body = f"<div class='warn'>rollback failed: {pages.e(error)}</div>"
            return html(request, session, body, status=409)
        result = links.layer(session, layer_id) + "/rolled-back"
        return Response(status_code=303, headers={"location": result})

    def rolled_back(request: Request, session: str) -> str:
        """What a rollback did, read back from its record (a reload re-posts nothing)."""
        layer_id = viewer.stored_id(session, str(request.path_params["layer"]))
        done = viewer.rolled_back(session, layer_id)
        if done is None:
            raise KeyError(f"layer {layer_id} of session {session} has not been rolled back")
        layers, before, after = done
        return layer_pages.rolled_back_page(session, layer_id, layers, before, after, links)

    def functions(request: Request, session: str) -> str:
        return pages.functions_page(session, viewer.functions(session), links)

    def function(request: Request, session: str) -> str:
        graph, _ = viewer.loaded(session)
        node_id = viewer.stored_id(session, str(request.path_params["node"]))
        if node_id not in graph or graph.get(node_id).kind != "function":
            raise KeyError(f"no function {node_id} in session {session}")
        return pages.function_page(
            session, graph.get(node_id), viewer.expand(session, node_id), links
        )

    def records(request: Request, session: str) -> str:
        tier = request.query_params.get("tier", "")
        return pages.records_page(session, viewer.records(session), links, tier=tier)

    def search(request: Request, session: str) -> str:
        query = request.query_params.get("q", "")
        hits, total = viewer.search(session, query, pages.PAGE) if query else ([], 0)
        shown = viewer.shown(session) if hits else {}
        return pages.search_page(session, query, hits, total, links, shown=shown)

    def nodes(request: Request, session: str) -> str:
        graph, _ = viewer.loaded(session)
        page = page_of(request, len(graph.nodes()))
        found, total = viewer.nodes(session, page, pages.PAGE)
        return pages.nodes_page(session, found, total, page, links)

    def node(request: Request, session: str) -> str:
        graph, _ = viewer.loaded(session)
        node_id = viewer.stored_id(session, str(request.path_params["node"]))
        if node_id not in graph:
            raise KeyError(f"no node {node_id} in session {session}")
        return pages.node_page(session, graph.get(node_id), graph.layers(), links)

    async def version(request: Request) -> Response:
        try:
            session = await run_in_threadpool(sid, request)
        except KeyError:
            return PlainTextResponse("", 404)
        return PlainTextResponse(await run_in_threadpool(viewer.version, session))

    async def state_file(request: Request) -> Response:
        """An offloaded output, by its path in the state folder; nothing outside it."""
        root = viewer.state_path.resolve()
        target = (root / str(request.path_params["path"])).resolve()
        if not target.is_relative_to(root) or not target.is_file():
            return PlainTextResponse("no such file in the state folder", 404)
        return FileResponse(Path(target), media_type="text/plain; charset=utf-8")

    routes = [
        Route("/", index),
        Route("/version", all_versions),
        Route("/s/{session}", view(timeline, then=viewer.prefetch)),
        Route("/s/{session}/version", version),
        Route("/s/{session}/prompt", view(prompt)),
        Route("/s/{session}/call/{receipt}", view(prompt)),
        Route("/s/{session}/layers", view(layers)),
        Route("/s/{session}/layer/{layer}", view(layer, live_view=False)),
        Route("/s/{session}/layer/{layer}/rollback", rollback, methods=["POST"]),
        Route("/s/{session}/layer/{layer}/rolled-back", view(rolled_back, live_view=False)),
        Route("/s/{session}/functions", view(functions)),
        Route("/s/{session}/function/{node}", view(function)),
        Route("/s/{session}/records", view(records)),
        Route("/s/{session}/search", view(search, live_view=False)),
        Route("/s/{session}/nodes", view(nodes)),
        Route("/s/{session}/node/{node}", view(node)),
        Route("/files/{path:path}", state_file),
    ]
    return Guard(Starlette(routes=routes), token=token, hosts=hosts, cookie=cookie)
