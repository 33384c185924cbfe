"""Secrets are redacted where they would leave: at append when asked, before a summarizer,
in exports. Tested with real-looking keys."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from context import Anchors, ContextEngine, Policy, SummaryRequest, SummaryResult
from graph import ConversationGraph, Redactor

# Real-looking, not real: the right shapes and lengths, made-up characters.
SECRETS = {
    "openai-key": "sk-proj-Q7vX2mKp9LrT4wYz8NbC1dFh6JsA3eGu5iOq0VyRkWtM",
    "anthropic-key": "sk-ant-api03-Zx8Lq2Wm5Np9Rt4Yv7Bc1Df6Gh3Jk0Mn-_QpRsTuVwXyZaB",
    "aws-access-key": "AKIAQ3EGUMZ7XK2LPN5W",
    "github-token": "ghp_R4nD0mL00k1ngT0k3nV4lu3F0rT3st1ngAb",
    "slack-token": "xoxb-271828182845-9045235360287-AbCdEfGhIjKlMnOp",
    "stripe-key": "sk_live_51MzQ8rLpKx2NvBw7YtHc3Ga9",
    "google-api-key": "AIzaSyD3x9Kq7Lm2Np5Rt8Vw1Yz4Bc6Df0Gh3Jk",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIiwiaWF0IjoxNzAwMDAwMDAwfQ.Sfl4kQw9Zp3mX7vB2nC5tR8yL1dF6hJ0",
}
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACDm3x9Q7vT2kLpR8nYwZc5bHf1gJd4sAe6iOu0qMrXyVgAAAJgKx2mPCsdp\n"
    "-----END OPENSSH PRIVATE KEY-----"
)


def test_every_default_kind_is_found_and_replaced() -> None:
    redactor = Redactor()
    for kind, secret in SECRETS.items():
        text = f"config: {secret} (loaded)"
        assert redactor.found(text)[0] == kind
        assert redactor.redact(text) == f"config: [REDACTED:{kind}] (loaded)"
    assert redactor.redact(f"key:\n{PRIVATE_KEY}\ndone") == "key:\n[REDACTED:private-key]\ndone"
    bearer = "curl -H 'Authorization: Bearer 9f3b7c1e5a2d8f4b6c0e9a7d3f1b5c8e'"
    assert redactor.redact(bearer) == "curl -H 'Authorization: Bearer [REDACTED:bearer]'"
    url = "DATABASE_URL=postgres://app:S3cr3tPassw0rd@db.internal:5432/prod"
    assert "S3cr3t" not in redactor.redact(url) and "app:" in redactor.redact(url)
    assert redactor.redact('password = "correct-horse-battery"').endswith('"[REDACTED:assignment]"')


def test_ordinary_text_is_left_alone() -> None:
    text = "edit src/parser.py: parse_header(raw) fails on sk-short; see PR-12 and the secret sauce"
    assert Redactor().redact(text) == text


def test_redaction_is_byte_stable_and_custom_patterns_add_up() -> None:
    redactor = Redactor({"ticket": r"INTERNAL-\d{4}"})
    text = f"{SECRETS['openai-key']} INTERNAL-1234"
    assert (
        redactor.redact(text) == redactor.redact(text) == "[REDACTED:openai-key] [REDACTED:ticket]"
    )


def test_a_graph_made_with_a_redactor_never_stores_the_secret(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/r.db"
    g = ConversationGraph.open(url, session="s", redactor=Redactor())
    g.append({"role": "user", "content": f"use {SECRETS['anthropic-key']}"})
    call = {
        "id": "c1",
        "type": "function",
        "function": {
            "name": "Bash",
            "arguments": json.dumps({"cmd": f"export K={SECRETS['github-token']}"}),
        },
    }
    g.append({"role": "assistant", "content": None, "tool_calls": [call]})
    g.append({"role": "tool", "tool_call_id": "c1", "content": f"AWS={SECRETS['aws-access-key']}"})
    stored = (tmp_path / "r.db").read_bytes()
    for secret in ("anthropic-key", "github-token", "aws-access-key"):
        assert SECRETS[secret].encode() not in stored
    text = json.dumps(ConversationGraph.open(url, session="s").to_openai())
    assert "[REDACTED:anthropic-key]" in text and "[REDACTED:github-token]" in text
    plain = ConversationGraph.memory()
    plain.append({"role": "user", "content": SECRETS["openai-key"]})
    assert plain.to_openai()[0]["content"] == SECRETS["openai-key"]  # only when asked


class Capture:
    name = "capture"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.seen.append(json.dumps([request.messages, request.task, request.system]))
        return SummaryResult(anchors=Anchors(execution_progress=("looked",)), summarizer="capture")


@pytest.mark.parametrize("redact", [True, False])
def test_what_goes_to_a_summarizer_is_redacted(tmp_path: Path, redact: bool) -> None:
    g = ConversationGraph.memory()
    g.append({"role": "system", "content": f"Deploy with {SECRETS['stripe-key']}"})
    g.append({"role": "user", "content": f"Task: rotate {SECRETS['openai-key']}"})
    for i in range(12):
        g.append({"role": "user", "content": f"step {i}: token {SECRETS['jwt']}"})
        g.append({"role": "assistant", "content": f"done {i} " + "word " * 40})
    capture = Capture()
    policy = Policy(redact_summaries=redact)
    engine = ContextEngine(g, policy, capture, budget=100_000)
    engine.collapse(g.nodes()[2].id, g.nodes()[11].id)
    [sent] = capture.seen
    leaked = [kind for kind, secret in SECRETS.items() if secret in sent]
    assert (leaked == []) if redact else (set(leaked) == {"jwt", "openai-key", "stripe-key"})


def test_the_cli_export_redacts_unless_told_not_to(tmp_path: Path, capsys: Any) -> None:
    from openprogram._cli import main

    db = str(tmp_path / "e.db")
    g = ConversationGraph.open(db, session="s")
    g.append({"role": "user", "content": f"my key is {SECRETS['openai-key']}"})
    out = tmp_path / "out.json"
    assert main(["--db", db, "export", "s", str(out), "--format", "openai"]) == 0
    assert (
        SECRETS["openai-key"] not in out.read_text() and "[REDACTED:openai-key]" in out.read_text()
    )
    assert main(["--db", db, "export", "s", str(out), "--format", "openai", "--no-redact"]) == 0
    assert SECRETS["openai-key"] in out.read_text()
    capsys.readouterr()
