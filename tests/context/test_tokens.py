"""Offline token counting, the per-node cache and the usage anchor."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from context import TokenCache, TokenCounter, UsageAnchor, encoding_name_for

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
IMAGE_TOKENS = 85  # a fixed charge per image part: OpenAI's low-detail tile cost


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter("claude-sonnet-4-5")


# --- encodings -----------------------------------------------------------------------


def _fresh(code: str, **env: str) -> None:
    """Run ``code`` in a fresh interpreter (nothing loaded yet), with ``env`` set."""
    environment = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_CACHE_DIR"}
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, env={**environment, **env})


def test_bundled_files_use_tiktoken_cache_names() -> None:
    _fresh(
        "import hashlib, os, pathlib; from context import TokenCounter; "
        "assert not TokenCounter('gpt-4').approximate; "
        "folder = pathlib.Path(os.environ['TIKTOKEN_CACHE_DIR']); "
        f"assert (folder / hashlib.sha1({CL100K_URL!r}.encode()).hexdigest()).is_file()"
    )


def test_loads_offline_in_a_fresh_interpreter() -> None:
    code = (
        "import os, sys; os.environ.pop('TIKTOKEN_CACHE_DIR', None); "
        "from context import TokenCounter; c = TokenCounter('gpt-4o'); "
        "assert not c.approximate and c.count_text('hello world') == 2; "
        "assert 'tokenizers' in os.environ['TIKTOKEN_CACHE_DIR']; "
        "assert 'litellm' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_user_cache_dir_is_respected(tmp_path: Path) -> None:
    mine = tmp_path / "tiktoken"
    mine.mkdir()
    name = hashlib.sha1(CL100K_URL.encode()).hexdigest()
    _fresh(  # the bundled file, copied to a folder of the user's
        "import os, pathlib, shutil; from context import TokenCounter; "
        "TokenCounter('gpt-4').count_text('x'); "
        f"shutil.copy(pathlib.Path(os.environ['TIKTOKEN_CACHE_DIR'], {name!r}), {str(mine)!r})"
    )
    _fresh(
        "import os; from context import TokenCounter; c = TokenCounter('gpt-4'); "
        "assert not c.approximate and c.count_text('hello world') == 2; "
        f"assert os.environ['TIKTOKEN_CACHE_DIR'] == {str(mine)!r}",
        TIKTOKEN_CACHE_DIR=str(mine),
    )


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("gpt-4o", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("azure/eu/gpt-4.1", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("claude-sonnet-4-5", "cl100k_base"),
        ("anthropic/claude-sonnet-4-5", "cl100k_base"),
        ("gemini/gemini-2.5-pro", "cl100k_base"),
        ("no-such-model", "cl100k_base"),
        ("", "cl100k_base"),
        (None, "cl100k_base"),
    ],
)
def test_encoding_name_for(model: str | None, name: str) -> None:
    assert encoding_name_for(model) == name


def test_counter_picks_model_encoding() -> None:
    assert TokenCounter("gpt-4o").encoding_name == "o200k_base"
    assert TokenCounter().encoding_name == "cl100k_base"
    assert TokenCounter("gpt-4o", encoding="cl100k_base").encoding_name == "cl100k_base"


def test_unloadable_encoding_falls_back_to_cl100k() -> None:
    counter = TokenCounter(encoding="no-such-encoding")
    assert counter.encoding_name == "cl100k_base"
    assert not counter.approximate
    assert counter.count_text("hello world") == 2


# --- counting --------------------------------------------------------------------------


def test_count_text(counter: TokenCounter) -> None:
    assert counter.count_text("hello world") == 2  # "hello", " world"
    assert counter.count_text("") == 0


def test_special_tokens_are_plain_text(counter: TokenCounter) -> None:
    # "<", "|", "endo", "ft", "ext", "|", ">": counted, never rejected.
    assert counter.count_text("<|endoftext|>") == 7


def test_count_message_string_content(counter: TokenCounter) -> None:
    assert counter.count_message({"role": "user", "content": "hello world"}) == 6


def test_name_and_tool_call_id_do_not_count(counter: TokenCounter) -> None:
    message = {
        "role": "tool",
        "tool_call_id": "call_abcdefghijklmnop",
        "name": "get_weather",
        "content": "hello world",
    }
    assert counter.count_message(message) == 6


def test_none_content_counts_zero(counter: TokenCounter) -> None:
    assert counter.count_message({"role": "assistant", "content": None}) == 4
    assert counter.count_message({"role": "assistant"}) == 4


def test_tool_calls_count_name_and_arguments(counter: TokenCounter) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call, call]}
    # 4 + 2 * ("get", "_weather" = 2 + '{"', "city", '":"', "Paris", '"}' = 5)
    assert counter.count_message(message) == 4 + 2 * (2 + 5)


def test_dict_arguments_count_as_compact_json(counter: TokenCounter) -> None:
    call = {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    assert counter.count_message({"role": "assistant", "tool_calls": [call]}) == 4 + 2 + 5


def test_reasoning_counts(counter: TokenCounter) -> None:
    message = {
        "role": "assistant",
        "content": "hello world",
        "thinking": "Let me think.",  # 4
        "reasoning_content": "look at this",  # 3
    }
    assert counter.count_message(message) == 4 + 2 + 4 + 3


def test_content_parts(counter: TokenCounter) -> None:
    parts: list[Any] = [
        {"type": "text", "text": "hello world"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 5000}},
        {"type": "input_audio", "input_audio": {"data": "abc", "format": "wav"}},
    ]
    audio_json = '{"input_audio":{"data":"abc","format":"wav"},"type":"input_audio"}'
    expected = 4 + 2 + IMAGE_TOKENS + counter.count_text(audio_json)
    assert counter.count_message({"role": "user", "content": parts}) == expected
    assert counter.count_text(audio_json) == 17


def test_count_messages_sums(counter: TokenCounter) -> None:
    messages = [
        {"role": "system", "content": "hello world"},
        {"role": "user", "content": "look at this"},
    ]
    assert counter.count_messages(messages) == 6 + 7
    assert counter.count_messages([]) == 0


def test_count_tools_is_key_order_independent(counter: TokenCounter) -> None:
    schema: dict[str, Any] = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    reordered = {"function": dict(reversed(list(schema["function"].items()))), "type": "function"}
    assert counter.count_tools([schema]) == 28
    assert counter.count_tools([reordered]) == 28
    assert counter.count_tools([schema, schema]) == 56
    assert counter.count_tools([]) == 0


# --- cache -----------------------------------------------------------------------------


def test_cache_tracks_new_entries() -> None:
    cache = TokenCache()
    cache.update({"a:full": 10, "b:full": 20})
    assert len(cache) == 2
    assert cache.dirty() == {}
    cache.put("c:full", 30)
    cache.put("a:full", 10)  # unchanged: not new
    assert cache.dirty() == {"c:full": 30}
    cache.clear_dirty()
    assert cache.dirty() == {}
    assert dict(cache.items()) == {"a:full": 10, "b:full": 20, "c:full": 30}
    assert cache.get("missing") is None
    assert "c:full" in cache


def test_count_cached_tokenizes_once(
    counter: TokenCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = TokenCache()
    message = {"role": "user", "content": "hello world"}
    assert counter.count_cached("n1:full", message, cache) == 6
    assert cache.dirty() == {"n1:full": 6}

    def fail(self: TokenCounter, message: object) -> int:
        raise AssertionError("tokenized twice")

    monkeypatch.setattr(TokenCounter, "count_message", fail)
    assert counter.count_cached("n1:full", message, cache) == 6


# --- anchor ----------------------------------------------------------------------------


def test_anchor_starts_neutral() -> None:
    anchor = UsageAnchor()
    assert anchor.ratio == 1.0
    assert anchor.adjust(100) == 100


def test_anchor_first_report_sets_ratio_then_fits_a_line() -> None:
    anchor = UsageAnchor()
    anchor.anchor_usage(estimated=1000, reported=1200)
    assert anchor.ratio == pytest.approx(1.2) and anchor.offset == 0.0
    assert anchor.adjust(100) == 120  # not 121: float noise is not rounded up
    # a hidden 5,000-token system prompt and a tokenizer counting 10% more
    anchor = UsageAnchor()
    for estimated in (1_000, 2_000, 4_000, 8_000, 16_000):
        anchor.anchor_usage(estimated=estimated, reported=round(1.1 * estimated) + 5_000)
    assert anchor.ratio == pytest.approx(1.1, rel=0.01)
    assert anchor.offset == pytest.approx(5_000, rel=0.02)
    assert anchor.adjust(30_000) == pytest.approx(38_000, rel=0.005)
    assert anchor.reports == 5


def test_reports_of_one_size_keep_the_ratio_and_move_the_offset() -> None:
    anchor = UsageAnchor()
    anchor.anchor_usage(estimated=1000, reported=1200)
    anchor.anchor_usage(estimated=1000, reported=1000)
    assert anchor.ratio == pytest.approx(1.2)
    assert 1000 < anchor.adjust(1000) < 1200


def test_anchor_clamps_and_ignores_empty_reports() -> None:
    anchor = UsageAnchor()
    anchor.anchor_usage(estimated=100, reported=1000)
    assert anchor.ratio == 2.0
    anchor.anchor_usage(estimated=0, reported=50)
    anchor.anchor_usage(estimated=50, reported=0)
    assert anchor.reports == 1
    before = anchor.adjust(1000)
    anchor.anchor_usage(estimated=1000, reported=1)  # counts as half what was expected
    assert anchor.adjust(1000) >= before // 2 - 1
    assert UsageAnchor.MIN_RATIO <= anchor.ratio <= UsageAnchor.MAX_RATIO


def test_anchor_rejects_bad_decay() -> None:
    with pytest.raises(ValueError, match="decay"):
        UsageAnchor(decay=0.0)


def test_anchor_state_round_trips_and_reads_the_old_form() -> None:
    anchor = UsageAnchor()
    for estimated, reported in [(1000, 6000), (3000, 8200), (6000, 11_500)]:
        anchor.anchor_usage(estimated, reported)
    again = UsageAnchor()
    again.restore(*anchor.state())
    assert (again.ratio, again.offset, again.reports) == (anchor.ratio, anchor.offset, 3)
    again.anchor_usage(9000, 15_000)
    anchor.anchor_usage(9000, 15_000)
    assert again.state() == anchor.state()
    old = UsageAnchor()
    old.restore(1.3, 4)  # what engines saved before the offset existed
    assert (old.ratio, old.offset, old.reports) == (1.3, 0.0, 4)


@given(
    st.lists(
        st.tuples(st.integers(1, 500_000), st.integers(1, 1_000_000)), min_size=1, max_size=30
    ),
    st.integers(1, 400_000),
)
def test_anchor_stays_bounded_and_inverse_fits(reports: list[tuple[int, int]], budget: int) -> None:
    anchor = UsageAnchor()
    for estimated, reported in reports:
        anchor.anchor_usage(estimated, reported)
        assert UsageAnchor.MIN_RATIO <= anchor.ratio <= UsageAnchor.MAX_RATIO
    fitting = anchor.inverse(budget)
    if fitting > 0:
        assert anchor.adjust(fitting) <= budget
    assert anchor.adjust(fitting + 2) > budget or fitting + 2 <= 0


def test_a_provider_compaction_block_counts_like_its_text(counter: TokenCounter) -> None:
    summary = "Earlier: the parser in src/parse.py was fixed and tests pass. " * 20
    plain = counter.count_message({"role": "assistant", "content": summary})
    blocked = counter.count_message(
        {
            "role": "assistant",
            "content": None,
            "provider_specific_fields": {
                "compaction_blocks": [{"type": "compaction", "content": summary}]
            },
        }
    )
    assert blocked == plain


def test_a_cache_with_a_loader_reads_by_key_once_and_skips_unstored_nodes() -> None:
    asked: list[list[str] | None] = []
    stored = {"n1:full": 5, "n2:full": 7}

    def loader(keys: Any) -> dict[str, int]:
        asked.append(None if keys is None else list(keys))
        return {k: v for k, v in stored.items() if keys is None or k in keys}

    cache = TokenCache()
    cache.loader = loader
    cache.prefetch(["n1:full", "n9:full"])
    assert cache.get("n1:full") == 5 and cache.get("n9:full") is None  # no second read
    assert cache.get("n2:full") == 7  # a miss reads its own key
    cache.unstored.add("n3")
    assert cache.get("n3:full") is None  # appended after the reader started: not read
    assert asked == [["n1:full", "n9:full"], ["n2:full"]]
    assert cache.dirty() == {}
