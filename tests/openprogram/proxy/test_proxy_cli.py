"""``openprogram proxy`` from the command line: what it prints is what works."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from openprogram import Session


@contextlib.contextmanager
def _proxy(upstream: Any, tmp_path: Path, *options: str) -> Iterator[list[str]]:
    env = {**os.environ, "PYTHONPATH": str(Path.cwd())}
    process = subprocess.Popen(
        [sys.executable, "-c", "from openprogram.cli import run; run()", "proxy", "--port", "0",
         "--db", str(tmp_path / "p.db"), "--budget", "8000",
         "--upstream-anthropic", upstream.url, "--upstream-openai", upstream.url, *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert process.stdout is not None
    lines = [process.stdout.readline().strip(), process.stdout.readline().strip()]
    try:
        yield lines
    finally:
        process.terminate()
        process.communicate(timeout=20)


@pytest.fixture
def started(upstream: Any, tmp_path: Path) -> Iterator[list[str]]:
    with _proxy(upstream, tmp_path) as lines:
        yield lines


def test_the_summary_wait_and_the_summarizer_model_are_the_sessions_policy(
    upstream: Any, tmp_path: Path
) -> None:
    options = ("--summary-wait", "never", "--summarizer-model", "anthropic/claude-haiku-4-5")
    with _proxy(upstream, tmp_path, *options) as (anthropic_line, _):
        base = anthropic_line.split("=", 1)[1]
        with anthropic.Anthropic(base_url=base, api_key="k", max_retries=0) as claude:
            claude.messages.create(
                model="claude-sonnet-4-5", max_tokens=8,
                messages=[{"role": "user", "content": "hi"}],
                extra_headers={"x-openprogram-session": "cli-nowait"},
            )  # fmt: skip
    with Session(str(tmp_path / "p.db"), "cli-nowait") as session:
        assert session.policy.summary_wait == "never"
        assert session.policy.summarizer_model == "anthropic/claude-haiku-4-5"
        assert session.engine.summarizer.name == "litellm:anthropic/claude-haiku-4-5"  # type: ignore[attr-defined]


def test_it_prints_one_line_per_sdk_with_the_real_port(started: list[str], upstream: Any) -> None:
    anthropic_line, openai_line = started
    assert anthropic_line.startswith("ANTHROPIC_BASE_URL=http://127.0.0.1:")
    base = anthropic_line.split("=", 1)[1]
    assert openai_line == f"OPENAI_BASE_URL={base}/v1"
    port = int(base.split(":")[2].split("/")[0])
    assert port > 0
    with anthropic.Anthropic(base_url=base, api_key="k", max_retries=0) as claude:
        reply = claude.messages.create(
            model="claude-sonnet-4-5", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
    assert reply.content[0].text == "ok, done"  # type: ignore[union-attr]
    with openai.OpenAI(base_url=openai_line.split("=", 1)[1], api_key="k", max_retries=0) as chat:
        said = chat.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    assert said.choices[0].message.content == "ok, done"
    refused = httpx.post(f"http://127.0.0.1:{port}/v1/messages", json={})
    assert refused.status_code == 403
    assert [s.path for s in upstream.seen] == ["/v1/messages", "/v1/chat/completions"]


def test_a_bad_upstream_url_is_one_line(tmp_path: Path) -> None:
    from openprogram.cli import main

    code = main(
        ["proxy", "--port", "0", "--db", str(tmp_path / "p.db"), "--upstream-openai", "ftp://x"]
    )
    assert code == 2


def test_a_db_that_is_a_folder_or_in_no_folder_is_one_line_and_makes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The proxy opens its ``--db`` as every command does (not sqlite's "unable to open
    database file", and no folder made behind the user's back)."""
    from openprogram.cli import main

    folder = tmp_path / "agents"
    folder.mkdir()
    assert main(["proxy", "--port", "0", "--db", str(folder)]) == 2
    assert capsys.readouterr().err == (
        f"error: --db {folder} is a folder; name a database file, e.g. "
        f"{folder / 'openprogram.db'}\n"
    )
    missing = tmp_path / "missing" / "p.db"
    assert main(["proxy", "--port", "0", "--db", str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"error: --db {missing}: there is no folder {missing.parent}; create it first\n"
    )
    assert not missing.parent.exists()


def test_no_history_tools_is_a_flag() -> None:
    from openprogram.cli import parser

    assert parser().parse_args(["proxy"]).history_tools is True
    assert parser().parse_args(["proxy", "--no-history-tools"]).history_tools is False
