"""A huge tool output (tens of MB) renders correctly without being tokenized or copied
whole: the placeholder says what the output is, every count is an upper bound, and a
fresh engine trusts the offload file it finds (no timing here: see the benchmark)."""

from __future__ import annotations

from pathlib import Path

from _context_helpers import call

from context import ContextEngine, Policy, TokenCounter
from graph import ConversationGraph

LINE = "src/app/main.py:12 ERROR parse_header failed — é\n"


def _session(size: int) -> tuple[ConversationGraph, str]:
    g = ConversationGraph.memory("huge")
    g.append({"role": "system", "content": "You are terse."})
    g.append({"role": "user", "content": "Run the build."})
    g.append({"role": "assistant", "content": None, "tool_calls": [call("c1", "bash")]})
    output = "BEGIN\n" + LINE * (size // len(LINE)) + "END"
    g.append({"role": "tool", "tool_call_id": "c1", "content": output})
    return g, output


def test_a_20mb_output_renders_as_a_placeholder_with_upper_bound_counts(tmp_path: Path) -> None:
    g, output = _session(20 * 1024 * 1024)
    policy = Policy()
    rendered = ContextEngine(g, policy, budget=32_000, state_dir=tmp_path / "state").render()
    tool = next(m for m in rendered.messages if m["role"] == "tool")
    content = tool["content"]
    lines = output.count("\n") + 1
    assert content.startswith(f"[output offloaded: {len(output)} characters, {lines} lines; ")
    head, tail = policy.offload_preview_head_chars, policy.offload_preview_tail_chars
    assert output[:head] in content and content.endswith(output[-tail:])
    assert len(content) < head + tail + 1_000
    exact = TokenCounter(policy.model)
    assert rendered.tokens >= exact.count_messages(rendered.messages)  # what is sent
    assert rendered.fits
    node = g.nodes()[-1].id
    path = tmp_path / "state" / "tool_results" / "huge" / f"{node}.txt"
    assert path.read_bytes() == output.encode()


def test_a_fresh_engine_trusts_the_offload_file_and_renders_the_same(tmp_path: Path) -> None:
    g, output = _session(4 * 1024 * 1024)
    policy = Policy()
    first = ContextEngine(g, policy, budget=32_000, state_dir=tmp_path / "state").render()
    path = next((tmp_path / "state" / "tool_results" / "huge").iterdir())
    before = path.stat()
    again = ContextEngine(g, policy, budget=32_000, state_dir=tmp_path / "state").render()
    assert again.messages == first.messages and again.tokens == first.tokens
    assert path.stat().st_ino == before.st_ino  # not rewritten
    path.write_bytes(b"truncated")  # a file of another size is written again
    ContextEngine(g, policy, budget=32_000, state_dir=tmp_path / "state").render()
    assert path.read_bytes() == output.encode()


def utf8_length(text: str) -> int:
    """What a long text is counted as: its UTF-8 bytes, lone surrogates included."""
    return len(text.encode("utf-8", "surrogatepass"))


def test_long_texts_are_counted_by_their_utf8_length() -> None:
    counter = TokenCounter(exact_limit=1_000)
    ascii_text = "x" * 5_000
    mixed = ("é€😀a" * 600_000) + "\ud800"
    assert counter.count_text(ascii_text) == 5_000
    assert counter.count_text(mixed) == len(mixed.encode("utf-8", "surrogatepass"))
    sample = mixed[:2_000]
    assert TokenCounter().count_text(sample) <= utf8_length(sample)  # never an undercount


def _parts_session(parts: int, part_chars: int) -> ConversationGraph:
    g = ConversationGraph.memory("parts")
    g.append({"role": "user", "content": "Read the logs."})
    g.append({"role": "assistant", "content": None, "tool_calls": [call("c1", "cat")]})
    text = (LINE * (part_chars // len(LINE) + 1))[:part_chars]
    content = [{"type": "text", "text": f"{i}:{text}"} for i in range(parts)]
    g.append({"role": "tool", "tool_call_id": "c1", "content": content})
    return g


class _NoTokenizer:
    def encode_ordinary(self, text: str) -> list[int]:
        raise AssertionError(f"tokenized {len(text)} characters")


def test_a_long_output_in_many_small_parts_is_bounded_like_one_string() -> None:
    counter = TokenCounter(exact_limit=1_000)
    parts = [{"type": "text", "text": "é" * 100 + "x" * 50} for _ in range(20)]
    message = {"role": "tool", "tool_call_id": "c1", "content": parts}
    counter._encoding, counter._loaded = _NoTokenizer(), True  # any tokenizer call fails
    expected = sum(utf8_length(p["text"]) for p in parts)
    assert counter.count_message(message) == 4 + expected
    few = {"role": "tool", "tool_call_id": "c1", "content": parts[:5]}  # 750 characters
    exact = TokenCounter(exact_limit=1_000)
    assert exact.count_message(few) == 4 + sum(exact.count_text(p["text"]) for p in parts[:5])
    assert exact.count_message(few) <= 4 + sum(utf8_length(p["text"]) for p in parts[:5])


def test_a_many_part_output_renders_under_budget(tmp_path: Path) -> None:
    g = _parts_session(parts=400, part_chars=8_000)  # 3.2 MB, each part under the limit
    rendered = ContextEngine(g, Policy(), budget=32_000, state_dir=tmp_path / "state").render()
    assert rendered.fits
    exact = TokenCounter()
    assert rendered.tokens >= exact.count_messages(rendered.messages)
