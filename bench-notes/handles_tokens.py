"""Identifier tokens per prompt: what naming nodes by handle saves (issue 34, item 2).

    PYTHONPATH=$PWD .venv/bin/python bench-notes/handles_tokens.py \
        ../shared/traces/claude-code ../shared/traces/mini-swe-agent [--budget 32000 8000]

Replays each trace as ``openprogram bench`` does (claude-code and progressive, cl100k) and,
in every message the engine wrote or rewrote (a placeholder, a note, a layer: its source
is not the node shown whole), counts the cl100k tokens of the identifiers it names: node,
layer and function ids (``fn_<ULID>``), offload file paths, and handles (``n42``,
``fn_42``, ``L3``); each identifier is encoded alone. Prints one JSON line per budget and
policy: prompts, prompts naming an identifier, identifier tokens per prompt (mean over all
prompts and over those naming one), and mean prompt tokens. Run it on a checkout before
and after handles with the same arguments to compare.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import tiktoken

from context import TokenCounter
from openprogram.bench._replay import MessageCounter, load_trace, run_policy, trace_files

IDENTIFIER = re.compile(
    r"[\w./-]*tool_results/[\w.-]+/[\w.-]+\.txt"  # an offload file's path
    r"|(?:fn_)?[0-9A-HJKMNP-TV-Z]{26}"  # a ULID, bare or as a function's call id
    r"|(?<![\w/.-])(?:fn_|n|L)[1-9][0-9]*(?![\w/.-])"  # a handle
)


def identifier_tokens(message: dict[str, Any], encoding: tiktoken.Encoding) -> int:
    """Tokens of the identifiers ``message`` names (its text and its tool calls' ids)."""
    text = json.dumps(message, ensure_ascii=False)
    return sum(len(encoding.encode(found)) for found in IDENTIFIER.findall(text))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("traces", nargs="+", type=Path)
    parser.add_argument("--budget", type=int, nargs="+", default=[32_000, 8_000])
    parser.add_argument("--policies", default="claude-code,progressive")
    args = parser.parse_args()
    TokenCounter(encoding="cl100k_base")  # points tiktoken at litellm's bundled files
    encoding = tiktoken.get_encoding("cl100k_base")
    files = trace_files(args.traces)
    for budget in args.budget:
        for policy in args.policies.split(","):
            prompts = naming = ids = tokens = 0
            for path in files:
                trace = load_trace(path)
                found: list[int] = []

                def seen(turn: Any, fired: list[str], found: list[int] = found) -> None:
                    written = [
                        message
                        for message, source in zip(turn.prompt, turn.sources, strict=False)
                        if source is None or source.variant != "full" or source.layer
                    ]
                    found.append(sum(identifier_tokens(m, encoding) for m in written))
                    found.append(turn.prompt_tokens)

                run_policy(trace, policy, budget, MessageCounter(), on_turn=seen)
                for named, total in zip(found[::2], found[1::2], strict=True):
                    prompts += 1
                    naming += named > 0
                    ids += named
                    tokens += total
            print(
                json.dumps(
                    {
                        "budget": budget,
                        "policy": policy,
                        "prompts": prompts,
                        "prompts_naming_ids": naming,
                        "id_tokens_per_prompt": round(ids / max(1, prompts), 1),
                        "id_tokens_per_naming_prompt": round(ids / max(1, naming), 1),
                        "prompt_tokens_mean": round(tokens / max(1, prompts), 1),
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
