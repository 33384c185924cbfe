"""The redactor skips a default pattern whose literal hints are absent from the text: a
property that this never changes the result, over texts built from keys, near-keys, the
hints themselves and noise."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from graph import Redactor

FRAGMENTS = [
    "sk-ant-api03-" + "a" * 30,
    "sk-proj-" + "B7" * 15,
    "sk-short",
    "AKIA" + "Z" * 16,
    "aws_secret_access_key = " + "x/" * 20,
    "AWS_SECRET_ACCESS_KEY: " + "Y" * 40,
    "ghp_" + "c" * 36,
    "github_pat_" + "d" * 45,
    "glpat-" + "e" * 22,
    "xoxb-" + "1234567890-abc",
    "AIza" + "f" * 35,
    "sk_live_" + "g" * 24,
    "rk_test_" + "h" * 24,
    "eyJhbGciOiJI.eyJzdWIiOiIx.c2lnbmF0dXJl",
    "Bearer " + "tok." * 6,
    "BASIC " + "QWxhZGRpbjpvcGVu" * 2,
    "https://user:hunter2@example.com",
    "PASSWORD=correct-horse",
    "client_secret: 'abcdefgh12'",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----",
    "[REDACTED:aws-secret]",
    "\\n",
    " ",
    "\n",
    "=",
    ":",
    "gh",
    "secret",
    "path/to/file.py",
]


def plain(text: str) -> str:
    """Every default pattern run in order, none skipped (the reference)."""
    for kind, pattern in Redactor().patterns.items():
        marker = f"[REDACTED:{kind}]"
        text = pattern.sub(rf"\g<1>{marker}" if pattern.groups else marker, text)
    return text


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=12), max_size=12))
def test_skipping_absent_hints_never_changes_the_result(parts: list[str]) -> None:
    text = "".join(parts)
    assert Redactor().redact(text) == plain(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=6) | st.sampled_from([f[:6] for f in FRAGMENTS]))
def test_no_default_pattern_matches_a_text_shorter_than_seven(text: str) -> None:
    assert plain(text) == text == Redactor().redact(text)
    assert Redactor({"x": "a"}).redact("a") == "[REDACTED:x]"  # custom patterns still run
