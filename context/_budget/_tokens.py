"""Token counting with tiktoken, offline, cached per node (``_anchor`` maps it onto real usage).

tiktoken downloads its BPE files on first use, which fails offline. litellm ships the
common ones in ``litellm_core_utils/tokenizers``, named by the SHA-1 of their URL, which is
exactly tiktoken's cache layout; pointing ``TIKTOKEN_CACHE_DIR`` there (unless the user
already set it) makes every load local. litellm is located, never imported.

Only OpenAI models have a public tokenizer; every other model is counted with
``cl100k_base``, as litellm does, and ``UsageAnchor`` corrects the drift.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import math
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import tiktoken

from context._errors import TokenizerError

__all__ = [
    "DEFAULT_ENCODING",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "WIRE_MESSAGE_MARGIN",
    "WIRE_RESULT_MARGIN",
    "WIRE_TOOL_MARGIN",
    "TokenCache",
    "TokenCounter",
    "encoding_name_for",
    "utf8_length",
]

_log = logging.getLogger(__name__)

DEFAULT_ENCODING = "cl100k_base"
MESSAGE_OVERHEAD = 4
"""Tokens per chat message for the role and the framing tokens around it."""
IMAGE_TOKENS = 85
"""A fixed charge per image part: OpenAI's low-detail tile cost."""
WIRE_MESSAGE_MARGIN = 4
"""Tokens per message counted as sent (``TokenCounter.as_sent``) beyond its JSON counted
in two pieces, its frame and its content: the comma between two messages (or the list's
brackets) and the tokens BPE merges differently across the cut. Measured: at most 4 for
one message alone, at most 3 each in longer lists (``tests/context/test_tokens_as_sent.py``
holds it over random messages full of quotes, backslashes, newlines and non-ASCII)."""
WIRE_RESULT_MARGIN = 6
"""Tokens more per tool result counted as sent: a framework may name the tool in the
result message, which the graph does not keep (LangChain's ``"name":"lookup",``; a name
of up to three tokens)."""
WIRE_TOOL_MARGIN = 2
"""Tokens per tool schema counted as sent beyond its JSON: the comma between two schemas
and the brackets of the list."""

_IMAGE_PARTS = frozenset({"image_url", "image", "input_image"})


def _bundled_cache_dir() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    locations = spec.submodule_search_locations if spec is not None else None
    if not locations:
        return None
    folder = Path(next(iter(locations))) / "litellm_core_utils" / "tokenizers"
    return folder if folder.is_dir() else None


@functools.cache
def _use_bundled_files() -> None:
    folder = _bundled_cache_dir()
    if folder is not None:
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(folder))


@functools.cache
def _load(name: str) -> Any:
    """The Encoding for ``name``, or None when it cannot be loaded (cached either way,
    so a missing file costs one failed attempt, not one per render)."""
    _use_bundled_files()
    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:  # unknown name, missing file, no network
        _log.warning("cannot load tiktoken encoding %r: %s", name, exc)
        return None


def encoding_name_for(model: str | None) -> str:
    """tiktoken's encoding for an OpenAI model (provider prefixes ignored), else cl100k_base.

    >>> encoding_name_for("openai/gpt-4o"), encoding_name_for("claude-sonnet-4-5")
    ('o200k_base', 'cl100k_base')
    """
    if not model:
        return DEFAULT_ENCODING
    bare = model.strip().rpartition("/")[2]
    try:
        return str(tiktoken.encoding_name_for_model(bare))
    except KeyError:
        return DEFAULT_ENCODING


_CHUNK = 1 << 20


def utf8_length(text: str) -> int:
    """Bytes of ``text`` in UTF-8 (lone surrogates as three), without a copy of it all:
    ASCII text (flagged by CPython, so O(1)) is its length, other text is encoded a
    megabyte at a time.

    >>> utf8_length("abc"), utf8_length("é" * 3), utf8_length(chr(0xD800))
    (3, 6, 3)
    """
    if text.isascii():
        return len(text)
    return sum(
        len(text[start : start + _CHUNK].encode("utf-8", "surrogatepass"))
        for start in range(0, len(text), _CHUNK)
    )


def _text_chars(parts: list[Any]) -> int:
    """Characters of a content list's text parts: the limit on exact counting applies to
    their total, so a long output split into many small parts is bounded like one string."""
    total = 0
    for part in parts:
        if isinstance(part, str):
            total += len(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            total += len(part["text"])
    return total


def _compact_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _wire_json(value: object) -> str:
    """JSON as the OpenAI SDK writes a request body: compact, keys in their order, UTF-8."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _escaped(text: str) -> str:
    """``text`` as it stands inside a JSON string (quotes, backslashes, newlines escaped)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


_ESCAPED = dict.fromkeys([*range(32), ord('"'), ord("\\")])
"""The characters JSON escapes (each one takes at most 5 more bytes escaped: ``\\u0001``)."""


class TokenCache:
    """Token counts by key (node id plus a variant tag), so a node is tokenized once.

    Entries added since the last ``clear_dirty`` are tracked so only new counts need to
    be persisted; ``update`` loads stored counts without marking them new.

    >>> cache = TokenCache()
    >>> cache.put("n1:full", 12)
    >>> cache.get("n1:full"), cache.dirty()
    (12, {'n1:full': 12})
    """

    __slots__ = ("_absent", "_data", "_dirty", "loader", "tag", "unstored")

    def __init__(self) -> None:
        self.tag = ""
        """Appended to every key (``~tag``): counts made another way (a counter that
        counts messages as sent) are kept apart from the plain ones, in memory and stored."""
        self._data: dict[str, int] = {}
        self._dirty: dict[str, int] = {}
        self._absent: set[str] = set()
        self.loader: Callable[[Collection[str] | None], Mapping[str, int]] | None = None
        """Reads stored counts by key (all of them for None): set, the cache loads what is
        asked for, not every count of a long session (a fresh engine that builds a few
        units needs a few)."""
        self.unstored: set[str] = set()
        """Node ids whose counts are not looked for in the store (nodes appended after
        the reader started, which no one has counted yet in all likelihood: a render after
        an append should not pay a query to learn that; a count is the same when redone)."""

    def _key(self, key: str) -> str:
        return f"{key}~{self.tag}" if self.tag else key

    def get(self, key: str) -> int | None:
        key = self._key(key)
        found = self._data.get(key)
        if found is None and self.loader is not None and key not in self._absent:
            if key.partition(":")[0] in self.unstored:
                return None
            self._prefetch((key,))
            found = self._data.get(key)
        return found

    def prefetch(self, keys: Iterable[str]) -> None:
        """Load the stored counts of ``keys`` not known yet, in one read (fail-open: a
        count that cannot be read is counted again)."""
        if self.loader is not None:
            self._prefetch(self._key(k) for k in keys)

    def _prefetch(self, keys: Iterable[str]) -> None:
        if self.loader is None:
            return
        wanted = [k for k in keys if k not in self._data and k not in self._absent]
        if not wanted:
            return
        try:
            found = self.loader(wanted)
        except Exception:  # fail-open: the prompt matters more than the cache
            return
        self.update(found)
        self._absent.update(k for k in wanted if k not in found)

    def put(self, key: str, tokens: int) -> None:
        key = self._key(key)
        if self._data.get(key) != tokens:
            self._data[key] = tokens
            self._dirty[key] = tokens

    def update(self, stored: Mapping[str, int]) -> None:
        self._data.update(stored)
        for key in stored:
            self._dirty.pop(key, None)

    def items(self) -> Iterator[tuple[str, int]]:
        return iter(self._data.items())

    def dirty(self) -> dict[str, int]:
        return dict(self._dirty)

    def clear_dirty(self) -> None:
        self._dirty.clear()

    def draft(self) -> TokenCache:
        """A cache over the same counts whose new counts are readable by everyone but
        persisted by no one (what a preview counts: the value is the same when redone)."""
        draft = TokenCache()
        draft._data, draft._absent, draft.unstored = self._data, self._absent, self.unstored
        draft.tag = self.tag
        draft.loader = self.loader
        return draft

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._key(key) in self._data


class TokenCounter:
    """Counts tokens of texts, chat messages and tool schemas for one model.

    When no encoding file can be loaded (not even ``cl100k_base``) counts fall back to
    ``ceil(len(text) / 4)`` and ``approximate`` is True, unless ``strict`` asks for a
    ``TokenizerError`` instead: a rough budget beats a crashed render.

    >>> counter = TokenCounter("claude-sonnet-4-5")
    >>> counter.encoding_name, counter.count_text("hello world")
    ('cl100k_base', 2)
    >>> counter.count_message({"role": "user", "content": "hello world"})
    6
    """

    __slots__ = (
        "_approximate",
        "_encoding",
        "_lazy",
        "_loaded",
        "_model",
        "_strict",
        "as_sent",
        "encoding_name",
        "exact_limit",
    )

    def __init__(
        self,
        model: str | None = None,
        *,
        encoding: str | None = None,
        strict: bool = False,
        exact_limit: int | None = None,
        lazy: bool = False,
    ) -> None:
        self.encoding_name = encoding or encoding_name_for(model)
        self.exact_limit = exact_limit
        """Texts longer than this many characters are not tokenized: their UTF-8 length
        stands in, an upper bound (every token covers at least one byte), so a 100 MB
        output costs no tokenizer time and is never undercounted."""
        self.as_sent = False
        """Count each message and tool schema as the JSON an OpenAI-compatible client sends
        (its keys, call ids and escapes, plus ``WIRE_MESSAGE_MARGIN``, ``WIRE_RESULT_MARGIN``
        and ``WIRE_TOOL_MARGIN``) rather than its text and ``MESSAGE_OVERHEAD``: the
        framework adapters set it, whose requests a framework writes out, every message a
        JSON object and every quote and newline of a tool output escaped."""
        self._model, self._strict, self._lazy = model, strict, lazy
        self._encoding: Any = None
        self._approximate = False
        self._loaded = False
        if not lazy:
            self._resolve()

    def _resolve(self) -> None:
        """Load the encoding. A ``lazy`` counter loads it on its first count (a render
        whose counts are all stored never pays the encoding's time and memory, ~0.1 s and
        40 MB) and keeps its name even when it falls back to the default encoding, so the
        counts it stores stay under the name it was made with."""
        self._loaded = True
        wanted = self.encoding_name
        self._encoding = _load(wanted)
        if self._encoding is None and wanted != DEFAULT_ENCODING:
            self._encoding = _load(DEFAULT_ENCODING)
            if self._encoding is not None and not self._lazy:
                self.encoding_name = DEFAULT_ENCODING
        if self._encoding is None:
            if self._strict:
                raise TokenizerError(
                    f"no tiktoken encoding could be loaded for {self._model or wanted!r} "
                    f"(tried {wanted!r} and {DEFAULT_ENCODING!r})"
                )
            self._approximate = True

    @property
    def approximate(self) -> bool:
        """Whether counts are ``ceil(len / 4)`` (no encoding could be loaded)."""
        if not self._loaded:
            self._resolve()
        return self._approximate

    def count_text(self, text: str) -> int:
        """Tokens of ``text``; special-token strings are counted as plain text."""
        if not text:
            return 0
        if self.exact_limit is not None and len(text) > self.exact_limit:
            return utf8_length(text)
        if not self._loaded:
            self._resolve()
        if self._encoding is None:
            return math.ceil(len(text) / 4)
        return len(self._encoding.encode_ordinary(text))

    def _count_value(self, value: object) -> int:
        if value is None:
            return 0
        if isinstance(value, str):
            return self.count_text(value)
        return self.count_text(_compact_json(value))

    def _count_content(self, content: object) -> int:
        if not isinstance(content, list):
            return self._count_value(content)
        bound = self.exact_limit is not None and _text_chars(content) > self.exact_limit
        count = utf8_length if bound else self.count_text
        total = 0
        for part in content:
            if isinstance(part, dict):
                kind = part.get("type")
                if kind == "text" and isinstance(part.get("text"), str):
                    total += count(part["text"])
                    continue
                if kind in _IMAGE_PARTS:
                    total += IMAGE_TOKENS
                    continue
            if bound:
                total += utf8_length(part if isinstance(part, str) else _compact_json(part))
            else:
                total += self._count_value(part)
        return total

    def count_message(self, message: Mapping[str, Any]) -> int:
        """Tokens of one OpenAI-format chat message.

        Counted: a fixed overhead, the content (text parts, a fixed charge per image,
        other parts as JSON), reasoning text, provider compaction blocks, and each tool
        call's name and arguments.
        ``name`` and ``tool_call_id`` are framing and are left out. Counted
        :attr:`as_sent`: the message's JSON, every key of it.
        """
        if self.as_sent:
            return self._count_sent(message)
        total = MESSAGE_OVERHEAD + self._count_content(message.get("content"))
        total += self._count_value(message.get("thinking"))
        total += self._count_value(message.get("reasoning_content"))
        extra = message.get("provider_specific_fields")
        if isinstance(extra, Mapping):
            for block in extra.get("compaction_blocks") or ():
                content = block.get("content") if isinstance(block, Mapping) else block
                total += self._count_value(content)
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping):
                total += self._count_value(call)
                continue
            total += self._count_value(function.get("name"))
            total += self._count_value(function.get("arguments"))
        return total

    def _count_sent(self, message: Mapping[str, Any]) -> int:
        """The message's wire JSON in two pieces, so that a long content is escaped and
        counted once: the frame (every key, the content left empty) and the content."""
        content = message.get("content")
        frame = {
            key: "" if key == "content" and value is not None else value
            for key, value in message.items()
        }
        total = WIRE_MESSAGE_MARGIN + self.count_text(_wire_json(frame))
        if message.get("role") == "tool":
            total += WIRE_RESULT_MARGIN
        if isinstance(content, str):
            return total + self._count_escaped(content)
        if not isinstance(content, list):
            return total
        for part in content:
            if isinstance(part, dict) and part.get("type") in _IMAGE_PARTS:
                total += IMAGE_TOKENS + WIRE_MESSAGE_MARGIN
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                frame = {key: "" if key == "text" else value for key, value in part.items()}
                total += self.count_text(_wire_json(frame)) + 1
                total += self._count_escaped(part["text"])
            else:
                total += self.count_text(_wire_json(part)) + 1
        return total

    def _count_escaped(self, text: str) -> int:
        """Tokens of ``text`` escaped as a JSON string; past ``exact_limit`` an upper bound
        (its UTF-8 bytes and five more per character JSON escapes) without escaping it."""
        if self.exact_limit is not None and len(text) > self.exact_limit:
            return utf8_length(text) + 5 * (len(text) - len(text.translate(_ESCAPED)))
        return self.count_text(_escaped(text))

    def count_messages(self, messages: Iterable[Mapping[str, Any]]) -> int:
        return sum(self.count_message(message) for message in messages)

    def count_tools(self, tool_schemas: Iterable[Mapping[str, Any]]) -> int:
        """Tokens of tool schemas, each as compact JSON with sorted keys (stable); counted
        :attr:`as_sent`, in their own key order, each with ``WIRE_TOOL_MARGIN``."""
        if self.as_sent:
            return sum(
                self.count_text(_wire_json(schema)) + WIRE_TOOL_MARGIN for schema in tool_schemas
            )
        return sum(self.count_text(_compact_json(schema)) for schema in tool_schemas)

    def count_cached(self, key: str, message: Mapping[str, Any], cache: TokenCache) -> int:
        """``count_message`` through ``cache``: the key must change when the text does."""
        tokens = cache.get(key)
        if tokens is None:
            tokens = self.count_message(message)
            cache.put(key, tokens)
        return tokens
