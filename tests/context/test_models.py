"""Model limits from litellm's bundled map, read without importing litellm."""

from __future__ import annotations

import subprocess
import sys

import msgspec
import pytest

from context import (
    ContextError,
    ModelInfo,
    UnknownModel,
    is_anthropic,
    model_info,
    model_map_path,
)


def test_map_file_is_bundled_with_litellm() -> None:
    path = model_map_path()
    assert path.name == "model_prices_and_context_window_backup.json"
    assert path.parent.name == "litellm"
    assert path.is_file()


def test_litellm_is_not_imported() -> None:
    # In a fresh interpreter: other tests in the session may import litellm themselves.
    code = (
        "import sys; from context import model_info; model_info('gpt-4o'); "
        "assert 'litellm' not in sys.modules, 'litellm was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_exact_key() -> None:
    assert model_info("gpt-4o") == ModelInfo(
        name="gpt-4o", max_input_tokens=128_000, max_output_tokens=16_384, provider="openai"
    )


def test_model_info_is_frozen() -> None:
    info = model_info("gpt-4o")
    with pytest.raises(AttributeError):
        info.max_input_tokens = 1  # type: ignore[misc]
    assert msgspec.json.decode(msgspec.json.encode(info), type=ModelInfo) == info


@pytest.mark.parametrize(
    ("query", "key"),
    [
        ("openai/gpt-4o", "gpt-4o"),
        ("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("openrouter/anthropic/claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("  gpt-4o  ", "gpt-4o"),
        ("GPT-4o", "gpt-4o"),
        # an exact provider/name key wins over stripping
        ("gemini/gemini-2.5-pro", "gemini/gemini-2.5-pro"),
        ("vertex_ai/claude-sonnet-4-5", "vertex_ai/claude-sonnet-4-5"),
        # a bare name only present as provider/name
        ("mistral-large-latest", "mistral/mistral-large-latest"),
    ],
)
def test_resolution(query: str, key: str) -> None:
    assert model_info(query).name == key


def test_anthropic_prefix_limits() -> None:
    info = model_info("anthropic/claude-sonnet-4-5")
    assert info.provider == "anthropic"
    assert info.max_input_tokens == 200_000
    assert info.max_output_tokens == 64_000


def test_missing_limits_are_none() -> None:
    # sora-2 is a video model: the map gives it no token limits.
    info = model_info("sora-2")
    assert info.max_input_tokens is None
    assert info.max_output_tokens is None


def test_unknown_model_names_it_and_suggests() -> None:
    with pytest.raises(UnknownModel) as caught:
        model_info("claude-sonet-4-5")
    message = str(caught.value)
    assert "'claude-sonet-4-5'" in message
    assert "did you mean" in message
    assert "'claude-sonnet-4-5'" in message
    assert isinstance(caught.value, ContextError)
    assert isinstance(caught.value, KeyError)


@pytest.mark.parametrize("query", ["", "sample_spec", "no-such-provider/zzzz-qqqq"])
def test_unknown_without_suggestions(query: str) -> None:
    with pytest.raises(UnknownModel, match="not in litellm's model map"):
        model_info(query)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-sonnet-4-5", True),
        ("claude-sonnet-4-5-20250929", True),
        ("anthropic/claude-sonnet-4-5", True),
        ("anthropic/some-future-model", True),
        ("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0", True),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", True),
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", True),
        ("vertex_ai/claude-sonnet-4-5", True),
        ("claude-unreleased-9", True),
        ("gpt-4o", False),
        ("openai/gpt-4o", False),
        ("gemini/gemini-2.5-pro", False),
        ("vertex_ai/gemini-2.5-pro", False),
        # Claude behind an OpenAI-format proxy lacks Anthropic's API features.
        ("openrouter/anthropic/claude-sonnet-4-5", False),
        ("databricks/databricks-claude-sonnet-4-5", False),
        ("totally-unknown-model", False),
    ],
)
def test_is_anthropic(model: str, expected: bool) -> None:
    assert is_anthropic(model) is expected
