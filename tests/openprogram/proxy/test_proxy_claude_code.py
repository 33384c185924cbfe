"""The real Claude Code CLI behind the proxy, against a scripted upstream that answers with
tool calls (Read, Bash, Edit in a temp folder) for 20+ turns at a small budget, then a final
answer: Claude Code finishes, and every upstream request is within the budget, pair-valid
and holds the user's request.

Claude Code comes from npm (``npm install --prefix .cache/claude-code
@anthropic-ai/claude-code``, as ``.ci/run`` does; ``$OPENPROGRAM_CLAUDE_CODE`` names another
binary). Without it the test is skipped, except in CI, where it fails.

The session is then opened in ``openprogram view`` in headless Chromium (as
``tests/openprogram/test_view.py`` does; skipped without a browser): its timeline has a bar
per request sent. ``OPENPROGRAM_VIEW_SCREENSHOTS=DIR`` keeps it as ``DIR/proxy.png`` (the
README's).
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from _proxy_checks import anthropic_pair_problems, anthropic_tokens, holds
from _scripted_upstream import ScriptedUpstream, calls, stop_server, text
from conftest import start_proxy

from tests.openprogram._browser import chromium, missing, shot, viewer

BUDGET = 24_000
TURNS = 22
PROMPT = "Update notes.txt as the tools show, then say done."


def claude_binary() -> str:
    """The Claude Code binary (npm ships a native one: node is needed only to install it)."""
    given = os.environ.get("OPENPROGRAM_CLAUDE_CODE")
    local = Path(__file__).resolve().parents[3] / ".cache/claude-code/node_modules/.bin/claude"
    found = given or (str(local) if local.exists() else shutil.which("claude"))
    if found is None:
        reason = ("Claude Code is not installed: npm install --prefix .cache/claude-code "
                  "@anthropic-ai/claude-code (or set OPENPROGRAM_CLAUDE_CODE)")  # fmt: skip
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return found


def scripted(work: Path) -> tuple[Any, dict[str, int]]:
    turns = {"main": 0}
    lock = threading.Lock()

    def script(protocol: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        if "Read" not in {t.get("name") for t in body.get("tools") or ()}:
            return text("A title")  # a side call
        with lock:
            turns["main"] += 1
            n = turns["main"]
        if n > TURNS:
            return text("All done.")
        notes = str(work / "notes.txt")
        if n % 3 == 1:
            return calls(("Read", {"file_path": notes}))
        if n % 3 == 2:
            command = f"echo turn {n} >> {work}/log.txt && seq 1 1500"
            return calls(("Bash", {"command": command, "description": "log the turn"}))
        return calls(
            ("Edit", {"file_path": notes, "old_string": "beta", "new_string": f"beta\nline {n}"})
        )

    return script, turns


def test_claude_code_runs_20_turns_behind_the_proxy_within_budget(tmp_path: Path) -> None:
    binary = claude_binary()
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("alpha\nbeta\n")
    script, turns = scripted(work)
    upstream = ScriptedUpstream(script).start()
    running, handle = start_proxy(upstream, tmp_path / "proxy.db", budget=BUDGET)
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home),
           "ANTHROPIC_BASE_URL": running.anthropic_base, "ANTHROPIC_API_KEY": "sk-ant-dummy",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}  # fmt: skip
    try:
        done = subprocess.run(
            [binary, "-p", PROMPT, "--allowedTools", "Read,Bash,Edit", "--max-turns", "40"],
            cwd=work, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    finally:
        stop_server(*handle)  # type: ignore[misc]
        upstream.stop()
        running.proxy.close()
    assert done.returncode == 0, done.stderr[-2000:]
    assert "All done." in done.stdout
    assert turns["main"] == TURNS + 1
    assert (work / "notes.txt").read_text().count("line ") == TURNS // 3  # the Edits ran
    main = [b for b in upstream.bodies() if "Read" in {t.get("name") for t in b.get("tools") or ()}]
    assert len(main) == TURNS + 1
    for n, body in enumerate(main):
        assert anthropic_tokens(body) <= BUDGET, n
        assert anthropic_pair_problems(body) == [], n
        assert holds(body, PROMPT), n
        marks = [
            b
            for m in body["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
            if "cache_control" in b
        ]
        system_marks = [b for b in body["system"] if "cache_control" in b]
        assert (
            1
            <= len(marks) + len(system_marks) + sum("cache_control" in t for t in body["tools"])
            <= 4
        )
    sent = [r for r in running.proxy.records() if r["event"] == "sent"]
    assert len(sent) == TURNS + 1 and len({r["session"] for r in sent}) == 1
    assert all(r["tokens"] <= r["budget"] == BUDGET for r in sent)
    lengths = [len(b["messages"]) for b in main]
    assert any(b < a for a, b in itertools.pairwise(lengths))  # it compacted
    _viewed(running.db, sent[0]["session"], len(sent))


def _viewed(db: Path, session: str, requests: int) -> None:
    """The session in `openprogram view` (the real command): a timeline bar per request."""
    if missing():
        return
    with viewer(db) as url, chromium() as browser:
        base = url.split("/?token=")[0]
        page = browser.new_context(viewport={"width": 1100, "height": 760}).new_page()
        page.goto(url)
        assert page.locator(f"tr[data-id='{session}']").count() == 1
        page.goto(f"{base}/s/{session}?kinds=1")
        assert page.locator("svg.timeline a.bar").count() == requests
        shot(page, "proxy")
