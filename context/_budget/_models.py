"""A model's context window and output limit, from litellm's bundled model map.

litellm ships ``model_prices_and_context_window_backup.json`` (thousands of models with
their limits). Importing litellm itself costs seconds and pulls in network clients, so the
file is found through the import system and read directly, once, on first use.

Names are resolved the way callers write them to litellm: an exact key
(``gpt-4o``, ``gemini/gemini-2.5-pro``), then with provider prefixes stripped
(``openai/gpt-4o`` -> ``gpt-4o``), then as ``provider/name`` keys present in the map
(``mistral-large-latest`` -> ``mistral/mistral-large-latest``). Each step also retries the
name case-insensitively.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any

import msgspec

from context._errors import UnknownModel

__all__ = ["ModelInfo", "import_litellm", "is_anthropic", "model_info", "model_map_path"]

_MAP_FILE = "model_prices_and_context_window_backup.json"


def import_litellm() -> Any:
    """litellm, imported where a model is really called, told to use its bundled price map
    and Anthropic beta-header table instead of fetching them (a caller's setting wins)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
    import litellm

    return litellm


# Prefixes tried first when a bare name is only present as ``provider/name``; the rest
# follow in sorted order so resolution never depends on the JSON's key order.
_PREFERRED_PREFIXES = (
    "openai",
    "anthropic",
    "gemini",
    "vertex_ai",
    "mistral",
    "xai",
    "deepseek",
    "groq",
    "moonshot",
    "openrouter",
)

# Hosts that serve Anthropic's own API surface for Claude (prompt caching, context edits).
_CLAUDE_HOSTS = frozenset({"bedrock", "bedrock_converse", "vertex_ai", "vertex_ai_beta"})
_ANTHROPIC_PROVIDERS = frozenset({"anthropic", "vertex_ai-anthropic_models"})
_BEDROCK_CLAUDE_ID = re.compile(r"^(?:[a-z-]+\.)?anthropic\.claude")


class ModelInfo(msgspec.Struct, frozen=True):
    """What the map says about one model.

    ``name`` is the map key the query resolved to. A limit is ``None`` when the map does
    not give it (some image, audio and proxy entries), so callers choose their own default.

    >>> info = model_info("openai/gpt-4o")
    >>> (info.name, info.max_input_tokens, info.provider)
    ('gpt-4o', 128000, 'openai')
    """

    name: str
    max_input_tokens: int | None
    max_output_tokens: int | None
    provider: str | None


def model_map_path() -> Path:
    """Where litellm's bundled model map lives (the file :func:`model_info` reads), found
    without importing litellm: to check which figures a model's window came from."""
    spec = importlib.util.find_spec("litellm")
    locations = spec.submodule_search_locations if spec is not None else None
    if not locations:
        raise UnknownModel("litellm is not installed, so the model map is unavailable")
    return Path(next(iter(locations))) / _MAP_FILE


class _ModelMap:
    """The parsed map plus the indexes that make every lookup O(1)."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.entries: dict[str, dict[str, Any]] = {
            key: value
            for key, value in raw.items()
            if isinstance(value, dict) and key != "sample_spec"
        }
        self.lower: dict[str, str] = {}
        # bare name -> {prefix: full key}, for keys of the form ``prefix/bare``.
        self.by_bare: dict[str, dict[str, str]] = {}
        for key in self.entries:
            self.lower.setdefault(key.lower(), key)
            prefix, sep, bare = key.partition("/")
            if sep:
                self.by_bare.setdefault(bare.lower(), {}).setdefault(prefix, key)

    def find(self, name: str) -> str | None:
        if name in self.entries:
            return name
        return self.lower.get(name.lower())

    def resolve(self, model: str) -> str | None:
        name = model.strip()
        if not name:
            return None
        # 1. exact, then 2. strip provider prefixes one at a time.
        candidate = name
        while True:
            found = self.find(candidate)
            if found is not None:
                return found
            _, sep, rest = candidate.partition("/")
            if not sep or not rest:
                break
            candidate = rest
        # 3. the bare name under a provider prefix present in the map.
        forms = self.by_bare.get(candidate.lower())
        if not forms:
            return None
        for prefix in _PREFERRED_PREFIXES:
            if prefix in forms:
                return forms[prefix]
        return forms[min(forms)]

    def suggestions(self, model: str, n: int = 5) -> list[str]:
        name = model.strip().lower()
        close = difflib.get_close_matches(name, self.lower, n=n, cutoff=0.6)
        bare = name.rpartition("/")[2]
        if bare != name and len(close) < n:
            close += difflib.get_close_matches(bare, self.lower, n=n, cutoff=0.6)
        seen = dict.fromkeys(self.lower[c] for c in close)
        return list(seen)[:n]


@functools.cache
def _model_map() -> _ModelMap:
    path = model_map_path()
    try:
        raw = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise UnknownModel(f"cannot read the bundled model map at {path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise UnknownModel(f"the bundled model map at {path} is not a JSON object")
    return _ModelMap(raw)


def _as_limit(value: object) -> int | None:
    # The map is hand-maintained: ignore strings, bools and non-positive numbers.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value > 0 else None


@functools.lru_cache(maxsize=1024)
def model_info(model: str) -> ModelInfo:
    """The limits of ``model``; raises ``UnknownModel`` naming it and its close matches.

    >>> model_info("anthropic/claude-sonnet-4-5").max_output_tokens
    64000
    """
    models = _model_map()
    key = models.resolve(model)
    if key is None:
        hints = models.suggestions(model)
        hint = f"; did you mean {', '.join(map(repr, hints))}?" if hints else ""
        raise UnknownModel(f"model {model!r} is not in litellm's model map{hint}")
    entry = models.entries[key]
    provider = entry.get("litellm_provider")
    return ModelInfo(
        name=key,
        max_input_tokens=_as_limit(entry.get("max_input_tokens")),
        max_output_tokens=_as_limit(entry.get("max_output_tokens")),
        provider=provider if isinstance(provider, str) else None,
    )


def is_anthropic(model: str) -> bool:
    """Whether ``model`` is Claude served with Anthropic's API features.

    The cache-aware paths (prompt caching breakpoints, ``clear_tool_uses`` context edits)
    exist only there: Anthropic itself, Bedrock and Vertex. Claude behind other proxies
    (OpenRouter, Databricks, ...) speaks the OpenAI format and does not count.

    >>> is_anthropic("claude-sonnet-4-5"), is_anthropic("gpt-4o")
    (True, False)
    """
    name = model.strip().lower()
    if name.startswith(("claude", "anthropic/")) or _BEDROCK_CLAUDE_ID.match(name):
        return True
    head, sep, rest = name.partition("/")
    if sep:
        # A routed name: only Anthropic's own hosts keep its API surface.
        return head in _CLAUDE_HOSTS and "claude" in rest
    try:
        info = model_info(model)
    except UnknownModel:
        return False
    return info.provider in _ANTHROPIC_PROVIDERS
