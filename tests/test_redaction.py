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
    from openprogram.cli import main

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


KEY = SECRETS["anthropic-key"]


def _failing_function_then_rounds(g: ConversationGraph) -> None:
    g.append({"role": "system", "content": "You deploy."})
    g.append({"role": "user", "content": "Deploy the service"})
    with pytest.raises(RuntimeError), g.function("deploy", input={"env": "prod"}):
        raise RuntimeError(f"401 Unauthorized: key {KEY} was rejected")
    for i in range(6):
        g.append({"role": "user", "content": f"step {i}"})
        g.append({"role": "assistant", "content": f"did step {i} " + "word " * 30})


def test_a_failed_functions_error_never_reaches_the_summary_layer_records_or_log(
    tmp_path: Path,
) -> None:
    """The issue's probe: the error text of a failed function (read from its node's
    finish) went into the summary, the layer, the database record and the JSONL."""
    url = f"sqlite:///{tmp_path}/f.db"
    g = ConversationGraph.open(url, session="s")
    _failing_function_then_rounds(g)
    seen: list[str] = []
    engine = ContextEngine(g, Policy(), None, budget=100_000, state_dir=tmp_path / "state")
    engine.callbacks.append(lambda record: seen.append(json.dumps(msgspec_builtins(record))))
    layer = engine.collapse(g.nodes()[2].id, g.nodes()[-1].id)
    assert "[REDACTED:anthropic-key]" in json.dumps(msgspec_builtins(layer.layer))
    assert KEY not in json.dumps(msgspec_builtins(layer.layer))
    assert seen and all(KEY not in text for text in seen)
    assert KEY not in (tmp_path / "state" / "records" / "s.jsonl").read_text()
    assert all(KEY not in json.dumps(msgspec_builtins(r)) for r in engine.records())
    # the function's own node keeps what happened (only redact=True stores it redacted)
    assert any(n.finish is not None and KEY in (n.finish.error or "") for n in g.nodes())


def msgspec_builtins(value: Any) -> Any:
    import msgspec

    return msgspec.to_builtins(value)


def test_a_redacting_graph_stores_no_secret_in_any_field(tmp_path: Path) -> None:
    """Function input, output and error, node meta and tool results, not only content."""
    db = tmp_path / "all.db"
    g = ConversationGraph.open(db, session="s", redactor=Redactor())
    g.append({"role": "user", "content": "go"}, meta={"auth": KEY, KEY: "as a key"})
    with g.function("fetch", input={"token": KEY}, meta={"note": KEY}) as fn:
        fn.output = {"echo": [KEY]}
    with pytest.raises(RuntimeError), g.function("deploy"):
        raise RuntimeError(f"401: {KEY}")
    g.add_layer("note", [g.nodes()[0].id], f"summary {KEY}", meta={"why": KEY})
    g.close()
    assert KEY.encode() not in db.read_bytes()
    back = ConversationGraph.open(db, session="s")
    text = json.dumps([msgspec_builtins(n) for n in back.nodes()])
    assert KEY not in text and text.count("[REDACTED:anthropic-key]") == 6
    assert [n.finish.status for n in back.nodes() if n.finish] == ["completed", "error"]


def test_the_redaction_setting_is_plain_json_and_round_trips() -> None:
    from graph import redaction_setting, redactor_from

    custom = Redactor({"ticket": r"T-\d+"}, defaults=False)
    for redactor in (None, Redactor(), custom, Redactor({"ticket": r"T-\d+"})):
        setting = redaction_setting(redactor)
        assert json.loads(json.dumps(setting)) == setting
        assert redactor_from(setting) == redactor
    assert (
        redactor_from({"patterns": {"ticket": r"T-\d+"}, "defaults": False}).redact(f"T-1 {KEY}")
        == f"[REDACTED:ticket] {KEY}"
    )
    with pytest.raises(ValueError, match="redact"):
        redactor_from({"pattern": "x"})
    with pytest.raises(ValueError, match="does not compile"):
        redactor_from({"patterns": {"bad": "("}})


@pytest.mark.parametrize("form", ["openai", "json", "graphml"])
def test_every_export_format_redacts_every_field(tmp_path: Path, form: str) -> None:
    from openprogram.cli import main

    db = str(tmp_path / "x.db")
    g = ConversationGraph.open(db, session="s")
    g.append({"role": "user", "content": "go"}, meta={"auth": KEY})
    with pytest.raises(RuntimeError), g.function("deploy", input={"token": KEY}):
        raise RuntimeError(f"401 {KEY}")
    out = tmp_path / f"out.{form}"
    assert main(["--db", db, "export", "s", str(out), "--format", form]) == 0
    assert KEY not in out.read_text()
    assert main(["--db", db, "export", "s", str(out), "--format", form, "--no-redact"]) == 0
    # the graph formats hold what the networkx view holds: payloads where it has them
    assert KEY in out.read_text() or form != "openai"
    assert KEY in json.dumps(ConversationGraph.open(db, session="s").to_openai())  # untouched


def test_offload_files_and_history_tools_are_redacted_when_asked(tmp_path: Path) -> None:
    from openprogram import Session

    outputs: dict[bool, tuple[str, str]] = {}
    for asked in (False, True):
        state = tmp_path / f"state-{asked}"
        policy = Policy(redact_outputs=asked)
        s = Session(
            str(tmp_path / f"h{asked}.db"), "s", policy=policy, budget=8_000, state_dir=state
        )
        call = {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
        s.graph.append({"role": "user", "content": "read the env"})
        s.graph.append({"role": "assistant", "content": None, "tool_calls": [call]})
        tool = s.graph.append(
            {"role": "tool", "tool_call_id": "c1", "content": f"K={KEY}\n" + "z " * 20_000}
        )
        s.engine.render()
        [offloaded] = (state / "tool_results" / "s").iterdir()
        answers = "\n".join(
            [
                s.history.read_output(tool.id),
                s.history.inspect_node(tool.id),
                s.history.search_history("K="),
            ]
        )
        outputs[asked] = (offloaded.read_text(), answers)
        s.close()
    assert KEY in outputs[False][0] and KEY in outputs[False][1]  # only when asked
    assert KEY not in outputs[True][0] and KEY not in outputs[True][1]
    assert "[REDACTED:anthropic-key]" in outputs[True][0]
    assert outputs[True][1].count("[REDACTED:anthropic-key]") == 3
