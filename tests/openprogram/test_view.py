"""`openprogram view` driven in headless Chromium (Debian's `chromium`, Playwright for
Python): the session list, a prompt whose numbers are `openprogram context --json`'s, a
layer before and after, a rollback through the button that the CLI then sees, the token,
Host and CSRF checks, hostile messages shown as text, live updates and the static export.

The server is the real command, started as a user starts it. Without a browser the tests
are skipped, except under ``CI=true``, where they fail. ``OPENPROGRAM_VIEW_SCREENSHOTS=DIR``
keeps one screenshot of each view there (the README's come from this).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graph import ConversationGraph
from openprogram.cli import main
from tests.openprogram._browser import chromium, served, shot, viewer

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = (
    "<script>window.__pwned = 1</script></textarea><b>not bold</b> & <img src=x onerror=alert(1)>"
)


def _cli(*argv: str) -> Any:
    """A reading command's ``--json`` output, through the real entry point."""
    out = subprocess.run(
        [sys.executable, "-c", "from openprogram.cli import run; run()", *argv, "--json"],
        capture_output=True, text=True, check=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The offline demo's session (calls, compactions, functions, a rolled-back
    collapse), one more compaction layer made by `openprogram compact`, and a session of
    hostile messages."""
    folder = tmp_path_factory.mktemp("view")
    path = folder / "agent.db"
    assert main(["demo", "--db", str(path)]) == 0
    session = _cli("sessions", "--db", str(path))[0]["id"]
    assert main(["compact", session, "--db", str(path)]) == 0
    hostile = ConversationGraph.open(path, session="hostile-session")
    hostile.append({"role": "user", "content": HOSTILE})
    hostile.append({"role": "assistant", "content": f"echo: {HOSTILE}"})
    hostile.close()
    _layered(path)
    assert main(["compact", "layered", "--db", str(path)]) == 0
    return {"path": str(path), "session": session, "folder": folder}


def _layered(path: Path) -> None:
    """Tool rounds with a collapse layer, which `compact` then builds on."""
    from context import ContextEngine, Policy

    g = ConversationGraph.open(path, session="layered")
    g.append({"role": "system", "content": "You are terse."})
    g.append({"role": "user", "content": "Find why /export is slow."})
    assistants = []
    for i in range(14):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
        a = g.append({"role": "assistant", "content": f"reading part_{i}.py", "tool_calls": [call]})
        assistants.append(a.id)
        g.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"def fn_{i}(): ...\n" * 40})
    engine = ContextEngine(g, Policy(), budget=100_000)
    engine.collapse(assistants[1], assistants[6])
    engine.close()
    g.close()


@pytest.fixture(scope="module")
def server(db: dict[str, Any]) -> Iterator[dict[str, str]]:
    """`openprogram view --port 0 --no-open --allow-write`, as a user runs it."""
    with viewer(db["path"], "--allow-write") as line:
        base, token = line.split("/?token=")
        yield {"url": line, "base": base, "token": token}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Any, server: dict[str, str]) -> Iterator[Any]:
    """A fresh browser context that opened the printed URL (so it holds the cookie)."""
    context = browser.new_context(viewport={"width": 1100, "height": 760})
    tab = context.new_page()
    tab.goto(server["url"])
    try:
        yield tab
    finally:
        context.close()


def test_the_session_list_shows_every_session_and_searches_them(
    page: Any, db: dict[str, Any], server: dict[str, str]
) -> None:
    assert page.url == server["base"] + "/"  # the token went into a cookie, out of the URL
    rows = page.locator("#sessions tbody tr")
    assert sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.id)")) == sorted(
        [db["session"], "hostile-session", "layered"]
    )
    demo = page.locator(f"tr[data-id='{db['session']}'] td").all_inner_texts()
    listed = {s["id"]: s for s in _cli("sessions", "--db", db["path"])}
    assert demo[1] == f"{listed[db['session']]['nodes']:,}"
    assert demo[4].endswith("active of 7")  # six demo layers (handles left room) and one compact
    shot(page, "sessions")
    page.fill("input[name=q]", "HOSTILE")
    page.click("text=search")
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.id)") == ["hostile-session"]


def test_a_prompt_has_the_tokens_context_json_reports(
    page: Any, db: dict[str, Any], server: dict[str, str]
) -> None:
    expected = _cli("context", db["session"], "--db", db["path"])
    page.goto(f"{server['base']}/s/{db['session']}?kinds=1")
    bars = page.locator("svg.timeline a.bar")
    assert bars.count() == 50  # the first page of the 69 calls
    assert page.locator("svg.timeline g.compaction").count() > 0
    shot(page, "timeline")
    page.goto(f"{server['base']}/s/{db['session']}?page=1&kinds=1")
    bars.last.click()  # pick the last call: the one `context` re-renders
    page.wait_for_selector("#messages")
    tokens = page.locator("#messages td.tokens").all_inner_texts()
    assert [int(t.replace(",", "")) for t in tokens] == expected["message_tokens"]
    kinds = page.locator("#kinds td[data-kind]").evaluate_all(
        "cells => cells.map(c => [c.dataset.kind, Number(c.textContent.replace(/,/g, ''))])"
    )
    by_kind = dict(kinds)
    assert sum(by_kind.values()) == expected["tokens"]
    assert by_kind["tool schemas"] == expected["tokens"] - sum(expected["message_tokens"])
    assert page.locator("#total").inner_text() == f"{expected['tokens']:,}"
    assert by_kind["system messages"] > 0 and by_kind["user messages"] > 0
    # issue 33: the page's kinds are `context --json`'s parts, named alike
    assert {k: v for k, v in by_kind.items() if v} == expected["last_sent"]["shown"]["parts"]
    shot(page, "prompt")


def test_every_call_shows_its_prompt_exactly_as_sent(
    page: Any, db: dict[str, Any], server: dict[str, str]
) -> None:
    """Issue 22: after the demo's rollback and a later compaction, call 31 still shows the
    16 messages it sent (a render again gave 8), and no bar needs a tick for its total."""
    from context import ContextStorage, sent_prompt
    from graph import SQLStore

    storage = ContextStorage(SQLStore(db["path"], create=False), db["session"], migrate=False)
    receipts = storage.receipts()
    page.goto(f"{server['base']}/s/{db['session']}?kinds=1")
    assert page.locator("svg.timeline a.bar").count() == 50
    assert page.locator("svg.timeline line.sent").count() == 0
    page.locator("svg.timeline a.bar").nth(30).click()
    page.wait_for_selector("#messages")
    receipt = receipts[30]
    sent = sent_prompt(storage, receipt)
    assert sent is not None and len(sent.messages) == receipt.messages
    assert page.locator("#messages tr.msg").count() == receipt.messages
    assert page.locator("#total").inner_text() == f"{receipt.tokens:,}"
    assert "exactly as sent" in page.locator("p").first.inner_text()
    shown = page.locator("#messages pre").all_inner_texts()
    assert shown[0] == sent.messages[0]["content"]


def _active_layer(db: dict[str, Any], kind: str = "compact") -> dict[str, Any]:
    layers = _cli("collapses", db["session"], "--db", db["path"])
    return next(x for x in layers if x["active"] and x["kind"] == kind)


def test_a_layer_shows_its_originals_beside_its_replacement(
    page: Any, db: dict[str, Any], server: dict[str, str]
) -> None:
    layer = _active_layer(db)
    page.goto(f"{server['base']}/s/{db['session']}/layers")
    page.click(f"text={layer['id']}")
    assert page.locator("#saved").inner_text() == f"{layer['tokens_saved']:,}"
    before = page.locator("#before tbody tr")
    after = page.locator("#after tbody tr")
    assert before.count() > after.count() >= 1
    assert "[Context Compaction]" in page.locator("#after").inner_text()
    originals = _cli("expand", layer["id"], "--db", db["path"])
    assert before.count() == len(originals)
    shot(page, "layer")


def test_a_rollback_through_the_button_is_what_the_cli_sees(
    page: Any, db: dict[str, Any], server: dict[str, str]
) -> None:
    layers = _cli("collapses", "layered", "--db", db["path"])
    first = next(x for x in layers if x["kind"] == "collapse")
    on_top = [x["id"] for x in layers if x["active"] and first["id"] in x["builds_on"]]
    assert on_top  # the compaction built on the collapse
    page.goto(f"{server['base']}/s/layered/layer/{first['id']}")
    page.click("#rollback")
    confirm = page.locator("#confirm")
    assert all(x in confirm.inner_text() for x in on_top)  # shown before anything happens
    assert all(x["active"] for x in _cli("collapses", "layered", "--db", db["path"]))
    shot(page, "rollback")
    page.click("#confirm-rollback")
    done = page.locator("#rolled-back")
    assert first["id"] in done.inner_text()
    after = int(page.locator("#after-tokens").inner_text().replace(",", ""))
    seen = {x["id"]: x for x in _cli("collapses", "layered", "--db", db["path"])}
    assert not seen[first["id"]]["active"]
    assert all(not seen[x]["active"] for x in on_top)
    assert after > 0


def _get(url: str, **headers: str) -> int:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        error.close()
        return int(error.code)


def test_a_request_without_the_token_is_refused(
    browser: Any, db: dict[str, Any], server: dict[str, str]
) -> None:
    base = server["base"]
    assert _get(f"{base}/") == 403
    assert _get(f"{base}/s/{db['session']}/prompt") == 403
    assert _get(f"{base}/?token=wrong") == 403
    port = base.rsplit(":", 1)[1]
    cookie = f"openprogram_view_{port}={server['token']}"
    assert _get(f"{base}/", Cookie=cookie) == 200
    assert _get(f"{base}/", Cookie=cookie, Host="attacker.example:80") == 403  # DNS rebinding
    assert _get(f"{base}/files/..%2F..%2F..%2Fetc%2Fpasswd", Cookie=cookie) == 404
    context = browser.new_context()
    try:
        tab = context.new_page()
        response = tab.goto(f"{base}/s/{db['session']}")
        assert response.status == 403 and "token" in tab.inner_text("body")
        post = tab.request.post(f"{base}/s/{db['session']}/layer/x/rollback", form={"csrf": "x"})
        assert post.status == 403
    finally:
        context.close()


def test_a_write_needs_the_csrf_token_and_the_same_origin(
    page: Any, db: dict[str, Any], server: dict[str, str]
) -> None:
    url = f"{server['base']}/s/{db['session']}/layer/none/rollback"
    assert page.request.post(url, form={"csrf": "guess"}).status == 403
    cross = page.request.post(
        url, form={"csrf": "guess"}, headers={"Origin": "http://evil.example"}
    )
    assert cross.status == 403


def test_a_session_that_sent_no_prompt_shows_its_next_one_as_context_does(
    page: Any, db: dict[str, Any], server: dict[str, str]
) -> None:
    expected = _cli("context", "hostile-session", "--db", db["path"])
    assert expected["source"] == "configuration"
    page.goto(f"{server['base']}/s/hostile-session/prompt")
    assert "no prompt sent yet" in page.locator("h3").inner_text()
    tokens = page.locator("#messages td.tokens").all_inner_texts()
    assert [int(t.replace(",", "")) for t in tokens] == expected["message_tokens"]
    assert page.locator("#total").inner_text() == f"{expected['tokens']:,}"
    assert HOSTILE in page.locator("#messages").inner_text()
    assert page.evaluate("window.__pwned") is None


def test_hostile_messages_are_shown_as_text(page: Any, server: dict[str, str]) -> None:
    page.goto(f"{server['base']}/s/hostile-session/nodes")
    first = page.locator("#nodes tbody tr a").first
    first.click()
    assert page.locator("#node-text").inner_text() == HOSTILE
    assert page.evaluate("window.__pwned") is None
    assert page.locator("main b", has_text="not bold").count() == 0
    page.goto(f"{server['base']}/s/hostile-session/search?q=textarea")
    assert "</textarea>" in page.locator("#hits").inner_text()
    assert page.evaluate("window.__pwned") is None
    shot(page, "hostile")


def test_the_function_tree_opens_a_function_and_records_filter_by_tier(
    page: Any, db: dict[str, Any], server: dict[str, str]
) -> None:
    page.goto(f"{server['base']}/s/{db['session']}/functions")
    rows = page.locator("#functions tbody tr")
    assert rows.count() > 8 and "completed" in rows.first.inner_text()
    shot(page, "functions")
    rows.first.locator("a").click()
    assert page.locator("#steps tr").count() >= 2
    page.goto(f"{server['base']}/s/{db['session']}/records")
    page.select_option("#tier", "collapse")
    page.click("text=filter")
    tiers = page.locator("#records tbody td:nth-child(2)").all_inner_texts()
    assert tiers and set(tiers) == {"collapse"}
    shot(page, "records")
    page.goto(f"{server['base']}/s/{db['session']}/search?q=EXPORT_TIMEOUT_S")
    hits = page.locator("#hits tbody tr")
    assert hits.count() >= 2
    said = hits.locator("td.shown").all_inner_texts()  # how the last prompt shows each
    assert said and all(re.match(r"shown|offloaded|under layer |not in the last", x) for x in said)
    hits.first.locator("a").first.click()
    assert "EXPORT_TIMEOUT_S" in page.locator("#node-text").inner_text()


def test_a_session_another_process_writes_updates_in_place(
    page: Any, db: dict[str, Any], server: dict[str, str]
) -> None:
    page.goto(f"{server['base']}/s/hostile-session/nodes")
    assert page.locator("#nodes tbody tr").count() == 2
    writer = ConversationGraph.open(db["path"], session="hostile-session")
    writer.append({"role": "user", "content": "a message written while the page is open"})
    writer.close()
    page.wait_for_selector("text=a message written while the page is open", timeout=20_000)
    assert page.locator("#nodes tbody tr").count() == 3
    assert page.url.endswith("/s/hostile-session/nodes")


def test_the_html_export_holds_the_same_views(
    browser: Any, db: dict[str, Any], tmp_path: Path
) -> None:
    """The export is paged as the live viewer is: the session list, and every other page a
    file of its own beside it, linked to each other, with no script anywhere."""
    out = tmp_path / "report.html"
    assert main(["view", "--db", db["path"], "--html", str(out)]) == 0
    files = [out, *sorted((tmp_path / "report_files").iterdir())]
    texts = [f.read_text() for f in files]
    assert len(files) > 10 and all(f.suffix == ".html" for f in files)
    assert not any("<script" in text for text in texts)  # the hostile one escaped
    hostile = "&lt;script&gt;window.__pwned = 1&lt;/script&gt;&lt;/textarea&gt;"
    assert any(hostile in text for text in texts)
    receipt = _cli("context", db["session"], "--db", db["path"])["receipt"]["id"]
    context = browser.new_context()
    try:
        tab = context.new_page()
        tab.goto(out.as_uri())
        tab.locator(f"#sessions tr[data-id='{db['session']}'] a").click()
        tab.wait_for_selector("text=Timeline")
        assert "/report_files/" in tab.url
        tab.locator("nav.tabs a", has_text="last prompt").click()
        tab.locator("text=the last call").click()
        assert tab.url.endswith(f"call-{receipt}.html") and tab.locator("#messages").is_visible()
        tab.locator("header a").click()  # back to the session list
        assert tab.url == out.as_uri() and tab.locator("#sessions").is_visible()
    finally:
        context.close()


def test_bad_command_lines_are_one_line_errors(
    db: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["view", "--db", str(tmp_path / "none.db"), "--no-open"]) == 1
    assert main(["view", "--db", db["path"], "no-such-session", "--no-open"]) == 2
    assert main(["view", "--db", db["path"], "--html", str(tmp_path / "no" / "x.html")]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("error:") for line in lines)
    assert "no-such-session" in lines[1] and "no folder" in lines[2]
    assert not (tmp_path / "none.db").exists()


def _cc_turns(first: int, last: int) -> list[dict[str, Any]]:
    """Claude Code transcript records: a user prompt and an assistant answer a round."""
    records = []
    for n in range(first, last + 1):
        base = {"isSidechain": False, "userType": "external", "sessionId": "follow-view",
                "timestamp": "2026-01-01T10:00:00.000Z"}  # fmt: skip
        parent = f"a{n - 1}" if n > 1 else None
        records.append({**base, "type": "user", "uuid": f"u{n}", "parentUuid": parent,
                        "message": {"role": "user", "content": f"step {n}"}})  # fmt: skip
        answer = {"model": "claude-test", "id": f"m{n}", "type": "message", "role": "assistant",
                  "content": [{"type": "text", "text": f"done with step {n}"}],
                  "usage": {"input_tokens": 10, "output_tokens": 1}}  # fmt: skip
        records.append({**base, "type": "assistant", "uuid": f"a{n}", "parentUuid": f"u{n}",
                        "message": answer})  # fmt: skip
    return records


def _start(*argv: str, stdin: Any = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", "from openprogram.cli import run; run()", *argv],
        stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(timeout=30)
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()


def test_a_session_mcp_follow_imports_updates_in_place(browser: Any, tmp_path: Path) -> None:
    trace = tmp_path / "session.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in _cc_turns(1, 2)))
    db = tmp_path / "follow.db"
    follow = _start("mcp", "--db", str(db), "--follow", str(trace), "--settle", "0",
                    stdin=subprocess.PIPE)  # fmt: skip
    view = None
    context = browser.new_context()
    try:
        tab = context.new_page()
        for _ in range(600):  # the follower's first import, then the viewer on its database
            if db.exists() and _cli("sessions", "--db", str(db)):
                break
            tab.wait_for_timeout(100)
        view = _start("view", "--db", str(db), "--port", "0", "--no-open")
        assert view.stdout is not None
        url = view.stdout.readline().strip()
        tab.goto(url)
        (session,) = _cli("sessions", "--db", str(db))
        tab.goto(f"{url.split('/?token=')[0]}/s/{session['id']}/nodes")
        assert "step 2" in tab.inner_text("#nodes") and "step 3" not in tab.inner_text("#nodes")
        with trace.open("a") as out:
            out.writelines(json.dumps(r) + "\n" for r in _cc_turns(3, 4))
        tab.wait_for_selector("text=done with step 4", timeout=30_000)
        assert tab.locator("#nodes tbody tr").count() == 8
    finally:
        context.close()
        _stop(follow)
        if view is not None:
            _stop(view)


def test_without_allow_write_there_is_no_button_and_a_write_is_refused(
    db: dict[str, Any],
) -> None:
    layer = _cli("collapses", db["session"], "--db", db["path"])[0]["id"]
    with served(db["path"]) as fetch:
        status, page, headers = fetch(f"/s/{db['session']}/layer/{layer}?confirm=1")
        assert status == 200 and 'id="rollback"' not in page
        assert "confirm-rollback" not in page
        policy = headers["content-security-policy"]
        script = next(part for part in policy.split(";") if "script-src" in part)
        assert script.split()[1:] and all(src.startswith("'nonce-") for src in script.split()[1:])
        # read-only comes first: whatever the form holds, the answer names the flag
        status, refusal, _ = fetch(f"/s/{db['session']}/layer/{layer}/rollback", {"csrf": "x"})
        assert status == 403 and "--allow-write" in refusal
    before = _cli("collapses", db["session"], "--db", db["path"])
    assert before[0]["id"] == layer


def test_viewing_writes_nothing(tmp_path: Path) -> None:
    """Every page, and the export, of a database made by ``import`` (with none of the
    context tables yet) leave its bytes as they were."""
    from graph import dispose_engines

    db = tmp_path / "op.db"
    trace = tmp_path / "chat.json"
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    trace.write_text(json.dumps([
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "assistant", "content": "one file"},
    ]))  # fmt: skip
    assert main(["--db", str(db), "import", str(trace), "--session", "s"]) == 0
    dispose_engines()
    before = db.read_bytes()
    folders = sorted(p.name for p in tmp_path.iterdir())
    with served(db) as fetch:
        views = ["", "prompt", "layers", "functions", "records", "search?q=a.py", "nodes"]
        for view in ["/", *(f"/s/s/{v}" for v in views)]:
            assert fetch(view)[0] == 200, view
    out = tmp_path / "out.html"
    assert main(["view", "--db", str(db), "--html", str(out)]) == 0
    dispose_engines()
    assert db.read_bytes() == before
    made = {p.name for p in tmp_path.iterdir()} - {*folders, "out.html", "out_files"}
    assert made <= {"op.db-wal", "op.db-shm"}  # SQLite's own reader files; no state folder


def test_an_offloaded_output_is_served_and_nothing_beside_the_state_folder(
    db: dict[str, Any],
) -> None:
    records = _cli("records", db["session"], "--db", db["path"])
    path = next(r["offloaded"][0]["path"] for r in records if r["offloaded"])
    state = Path(db["path"] + ".state")
    with served(db["path"]) as fetch:
        status, body, _ = fetch(f"/files/{path}")
        assert status == 200 and body == (state / path).read_text()
        for outside in ("../agent.db", "%2e%2e/agent.db", "..%2fagent.db", "/etc/hostname"):
            assert fetch(f"/files/{outside}")[0] == 404, outside
        pages = [fetch(f"/s/{db['session']}/call/{r}")[1] for r in _receipt_ids(db)]
        linked = {m for page in pages for m in re.findall(r'href="(/files/[^"]+)"', page)}
        assert linked and all(fetch(link)[0] == 200 for link in linked)


def _receipt_ids(db: dict[str, Any]) -> list[str]:
    from context import ContextStorage, state_folder
    from graph import SQLStore

    store = SQLStore(db["path"], create=False, read_only=True)
    try:
        return [
            r.id for r in ContextStorage(store, db["session"], state_folder(store, None)).receipts()
        ]
    finally:
        store.close()
