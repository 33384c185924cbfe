"""Secrets out of text: API keys, tokens and private keys replaced by a marker.

Agent histories carry credentials (a ``cat .env``, a curl with a bearer token), and a
summary sends history to a model that may belong to another provider. A :class:`Redactor`
replaces what its patterns match with ``[REDACTED:<kind>]`` — the same input always gives
the same output, so redacted prompts stay byte-stable. ``context`` redacts what goes to a
summarizer, the CLI what it exports, and a graph made with ``redactor=`` what is appended.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

DEFAULT_PATTERNS: dict[str, str] = {
    "private-key": (
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?"
        r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----"
    ),
    "anthropic-key": r"\bsk-ant-[A-Za-z0-9_-]{20,}",
    "openai-key": r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
    "aws-access-key": r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
    "aws-secret": r"(?i)(aws_secret_access_key\s*[=:]\s*[\"']?)[A-Za-z0-9/+=]{40}",
    "github-token": r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})",
    "gitlab-token": r"\bglpat-[A-Za-z0-9_-]{20,}",
    "slack-token": r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
    "google-api-key": r"\bAIza[0-9A-Za-z_-]{35}\b",
    "stripe-key": r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}",
    "jwt": r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    "bearer": r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{16,}",
    "basic-auth": r"(?i)(\bbasic\s+)[A-Za-z0-9+/]{16,}={0,2}",
    "url-password": r"(://[^/\s:@]+:)[^/\s@]+(?=@)",
    "assignment": (
        r"(?i)(\b(?:password|passwd|secret|api_key|apikey|access_token|auth_token|"
        r"client_secret)\b\s*[=:]\s*[\"']?)[^\s\"']{8,}"
    ),
}
"""Patterns by kind: common key formats, bearer and basic credentials, private-key blocks,
passwords in URLs and ``secret = ...`` assignments. A pattern's first group, if it has
one, is kept (``password=`` stays, what follows it goes)."""


class Redactor:
    """Replaces secrets in text (and in messages, recursively) with a marker.

    >>> Redactor().redact("key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123 in use")
    'key [REDACTED:anthropic-key] in use'
    >>> Redactor({"ticket": r"TICKET-\\d+"}, defaults=False).redact("see TICKET-42")
    'see [REDACTED:ticket]'
    """

    def __init__(self, patterns: Mapping[str, str] | None = None, *, defaults: bool = True) -> None:
        chosen = {**(DEFAULT_PATTERNS if defaults else {}), **(patterns or {})}
        self.patterns = {kind: re.compile(pattern) for kind, pattern in chosen.items()}

    def redact(self, text: str) -> str:
        for kind, pattern in self.patterns.items():
            marker = f"[REDACTED:{kind}]"
            text = pattern.sub(rf"\g<1>{marker}" if pattern.groups else marker, text)
        return text

    def value(self, value: Any) -> Any:
        """``value`` with every string inside it redacted (dicts and lists walked)."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value

    def found(self, text: str) -> list[str]:
        """The kinds of secret ``text`` holds (for reports and tests)."""
        return [kind for kind, pattern in self.patterns.items() if pattern.search(text)]
