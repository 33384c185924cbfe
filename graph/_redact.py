"""Secrets out of text: API keys, tokens and private keys replaced by a marker.

Agent histories carry credentials (a ``cat .env``, a curl with a bearer token), and a
summary sends history to a model that may belong to another provider. A :class:`Redactor`
replaces what its patterns match with ``[REDACTED:<kind>]`` — the same input always gives
the same output, so redacted prompts stay byte-stable. ``context`` redacts what goes to a
summarizer and into its records, the CLI what it exports, and a graph made with
``redactor=`` every record it stores (payloads, meta, results, finishes, layers).

A redaction setting is stored with a session as plain JSON (:func:`redaction_setting`):
``False`` (store as given), ``True`` (the default patterns) or ``{"patterns": {...},
"defaults": bool}``; :func:`redactor_from` turns it back into a :class:`Redactor`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from ._errors import InvalidMessage

_IDENTITY = frozenset(
    {"id", "session", "seq", "at", "node_id", "node_ids", "covers", "builds_on", "last"}
    | {"call_id", "layer"}
)
"""Struct fields that name nodes, sessions and calls: never redacted, so a broad custom
pattern cannot break the links between records."""

T = TypeVar("T")

_START = r"(?:(?<![A-Za-z0-9_])|(?<=\\[nrtbf]))"
"""Where a key may start: not inside a word, but right after a JSON escape too (a command
in a tool call's arguments reads ``"echo \\nsk-…"`` where the text had a newline)."""

DEFAULT_PATTERNS: dict[str, str] = {
    "private-key": (
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?"
        r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----"
    ),
    "anthropic-key": _START + r"sk-ant-[A-Za-z0-9_-]{20,}",
    "openai-key": _START + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
    "aws-access-key": _START + r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
    "aws-secret": r"(?i)(aws_secret_access_key\s*[=:]\s*[\"']?)[A-Za-z0-9/+=]{40}",
    "github-token": _START + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})",
    "gitlab-token": _START + r"glpat-[A-Za-z0-9_-]{20,}",
    "slack-token": _START + r"xox[abposr]-[A-Za-z0-9-]{10,}",
    "google-api-key": _START + r"AIza[0-9A-Za-z_-]{35}\b",
    "stripe-key": _START + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}",
    "jwt": _START + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    "bearer": r"(?i)(" + _START + r"bearer\s+)[A-Za-z0-9._~+/=-]{16,}",
    "basic-auth": r"(?i)(" + _START + r"basic\s+)[A-Za-z0-9+/]{16,}={0,2}",
    "url-password": r"(://[^/\s:@]+:)[^/\s@]+(?=@)",
    "assignment": (
        r"(?i)(" + _START + r"(?:password|passwd|secret|api_key|apikey|access_token|auth_token|"
        r"client_secret)\b\s*[=:]\s*[\"']?)[^\s\"']{8,}"
    ),
}
"""Patterns by kind: common key formats, bearer and basic credentials, private-key blocks,
passwords in URLs and ``secret = ...`` assignments. A pattern's first group, if it has
one, is kept (``password=`` stays, what follows it goes)."""

_HINTS: dict[str, tuple[tuple[str, ...], bool]] = {
    "private-key": (("-----BEGIN",), False),
    "anthropic-key": (("sk-ant-",), False),
    "openai-key": (("sk-",), False),
    "aws-access-key": (("AKIA", "ASIA", "ABIA", "ACCA"), False),
    "aws-secret": (("aws_secret_access_key",), True),
    "github-token": (("gh", "github_pat_"), False),
    "gitlab-token": (("glpat-",), False),
    "slack-token": (("xox",), False),
    "google-api-key": (("AIza",), False),
    "stripe-key": (("_live_", "_test_"), False),
    "jwt": (("eyJ",), False),
    "bearer": (("bearer",), True),
    "basic-auth": (("basic",), True),
    "url-password": (("://",), False),
    "assignment": (
        (
            "password", "passwd", "secret", "api_key", "apikey", "access_token", "auth_token",
            "client_secret",
        ),
        True,
    ),
}  # fmt: skip
"""A text each default pattern cannot match without (lower-cased where the pattern ignores
case): a pattern whose hints are all absent is not run, which changes nothing but time (most
text holds no secret, and a substring search is far cheaper than a regex scan)."""


_SHORTEST = 7
"""No default pattern matches in a shorter text (the shortest, a URL password, needs
``://a:b@``): the many short strings of a record (keys, names, small values) are passed."""


class Redactor:
    """Replaces secrets in text (and in messages, recursively) with a marker.

    >>> Redactor().redact("key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123 in use")
    'key [REDACTED:anthropic-key] in use'
    >>> Redactor({"ticket": r"TICKET-\\d+"}, defaults=False).redact("see TICKET-42")
    'see [REDACTED:ticket]'
    """

    def __init__(self, patterns: Mapping[str, str] | None = None, *, defaults: bool = True) -> None:
        self.extra = dict(patterns or {})
        """The patterns given beside (or instead of) the defaults."""
        self.defaults = defaults
        chosen = {**(DEFAULT_PATTERNS if defaults else {}), **self.extra}
        self.patterns = {kind: re.compile(pattern) for kind, pattern in chosen.items()}
        self._only_defaults = all(DEFAULT_PATTERNS.get(k) == p for k, p in chosen.items())

    @property
    def setting(self) -> bool | dict[str, Any]:
        """This redactor as JSON a session can store (:func:`redactor_from` reads it)."""
        if self.defaults and not self.extra:
            return True
        return {"patterns": dict(self.extra), "defaults": self.defaults}

    def with_patterns(self, patterns: Mapping[str, str]) -> Redactor:
        """This redactor plus ``patterns`` (the same one when they add nothing)."""
        if all(self.extra.get(kind) == pattern for kind, pattern in patterns.items()):
            return self
        return Redactor({**self.extra, **patterns}, defaults=self.defaults)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Redactor) and self.setting == other.setting

    def __hash__(self) -> int:
        return hash(repr(self.setting))

    def __repr__(self) -> str:
        return f"Redactor({self.extra!r}, defaults={self.defaults})"

    def redact(self, text: str) -> str:
        if len(text) < _SHORTEST and self._only_defaults:
            return text
        lowered: str | None = None
        for kind, pattern in self.patterns.items():
            hints = _HINTS.get(kind) if pattern.pattern == DEFAULT_PATTERNS.get(kind) else None
            if hints is not None:
                words, folded = hints
                haystack = text
                if folded:
                    lowered = haystack = text.lower() if lowered is None else lowered
                if not any(word in haystack for word in words):
                    continue
            marker = f"[REDACTED:{kind}]"
            replaced = pattern.sub(rf"\g<1>{marker}" if pattern.groups else marker, text)
            if replaced != text:
                text, lowered = replaced, None
        return text

    def value(self, value: T) -> T:
        """``value`` with every string inside it redacted: dicts (keys too), lists, tuples
        and stored records (msgspec structs: their text fields, never their ids) walked."""
        return self._walk(value, 0)  # type: ignore[no-any-return]

    def _walk(self, value: Any, depth: int) -> Any:
        if isinstance(value, str):
            return self.redact(value)
        if depth > _MAX_DEPTH:
            raise InvalidMessage("value", f"nested deeper than {_MAX_DEPTH} levels")
        if isinstance(value, dict):
            return {
                (self.redact(k) if isinstance(k, str) else k): self._walk(v, depth + 1)
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [self._walk(v, depth + 1) for v in value]
        if isinstance(value, tuple):
            return tuple(self._walk(v, depth + 1) for v in value)
        if isinstance(value, msgspec.Struct):
            changes = {}
            for name in value.__struct_fields__:
                if name in _IDENTITY:
                    continue
                old = getattr(value, name)
                new = self._walk(old, depth + 1)
                if new is not old and new != old:
                    changes[name] = new
            return msgspec.structs.replace(value, **changes) if changes else value
        return value

    def found(self, text: str) -> list[str]:
        """The kinds of secret ``text`` holds (for reports and tests)."""
        return [kind for kind, pattern in self.patterns.items() if pattern.search(text)]


_MAX_DEPTH = 400
"""A stored value nests at most 100 levels (``_codec.MAX_DEPTH``), a record a few more."""


def redactor_from(setting: bool | Redactor | Mapping[str, Any] | None) -> Redactor | None:
    """The redactor a stored setting names (None: store text as given).

    >>> redactor_from(False) is None, redactor_from(True) == Redactor()
    (True, True)
    >>> redactor_from({"patterns": {"ticket": "T-[0-9]+"}}).redact("T-7")
    '[REDACTED:ticket]'
    """
    if setting is None or setting is False:
        return None
    if setting is True:
        return Redactor()
    if isinstance(setting, Redactor):
        return setting
    if isinstance(setting, Mapping):
        unknown = set(setting) - {"patterns", "defaults"}
        patterns = setting.get("patterns") or {}
        defaults = setting.get("defaults", True)
        if unknown or not isinstance(patterns, Mapping) or not isinstance(defaults, bool):
            shape = "{'patterns': {kind: regex}, 'defaults': bool}"
            raise InvalidMessage("redact", f"{dict(setting)!r} is not {shape}")
        try:
            return Redactor({str(k): str(v) for k, v in patterns.items()}, defaults=defaults)
        except re.error as error:
            raise InvalidMessage("redact", f"a pattern does not compile: {error}") from None
    raise InvalidMessage("redact", f"{setting!r} is not a bool, a Redactor or a setting dict")


def redaction_setting(redactor: Redactor | None) -> bool | dict[str, Any]:
    """The JSON a session stores for ``redactor`` (``False`` for none)."""
    return False if redactor is None else redactor.setting
