"""The named tier orders and the tool categories the presets of ``Policy`` start from.

Kept apart from ``Policy`` (the settings and their checks): these are data the presets and
users name, each with the reason for its order.
"""

from __future__ import annotations

from typing import Any

CLAUDE_CODE_CASCADE = (
    "offload",
    "rereads",
    "microcompact",
    "compact",
    "collapse",
    "budget_reduction",
    "snip",
    "emergency",
)
"""Claude Code's tiers, ordered so that the newest outputs are the last thing cut. Superseded
re-reads of a file go first of those that lose anything (``rereads``: near-lossless). Then
the room comes from the old outputs, as one batch (``microcompact``: every compactable
output but the newest ``microcompact_keep`` is cleared to a pointer note). What is still
over is compacted: one summary of everything before the newest rounds, which leaves half
the room, so the next compaction waits until the prompt has filled again. Only what still
does not fit is cut in the middle (budget reduction acts over the budget, never to reach
the low-water mark). Each step rewrites the prompt from where it acts, so few deep steps
cost less than many shallow ones: collapsing ten rounds at a time first rewrote nearly the
whole prompt about every ten turns, so ``collapse`` comes after compact, for a prompt a
compaction left over the budget (one that would not pay), acting only over the budget.
Snip comes after both, which keep a summary of what they remove. On the shared traces at 32k (bench,
summaries charged): recall 0.9777 → 0.9852 (identifier lists off: 0.9724 → 0.9740) at
0.986× the peer's cost, against 1.064× (0.971× once summary requests were sampled to
their bound)."""
PROGRESSIVE_CASCADE = ("offload", "summarize_half", "compact", "emergency")
PROGRESSIVE_VALUES: dict[str, Any] = {
    "name": "progressive",
    "cascade": PROGRESSIVE_CASCADE,
    "always": (),
    "triggers": {"offload": 0.6, "summarize_half": 0.7, "compact": 0.8, "emergency": 0.95},
    "offload_chars": 4_000,
    "budget_reduction_chars": 4_000,
    "compact_keep_messages": 6,
    "compact_keep_rounds": 0,
    "compact_keep_share": 0.0,
    "buffer_tokens": 0,
    "offload_share": None,
    "compact_tokens": None,
    "conclusion_tokens": 0,
    "compact_min_fresh_share": 0.3,
    "offload_asked_share": None,
    "schedule_floor_exponent": None,
    "offload_chars_per_token": None,
    "identifier_share": 0.025,
    "schedule_floor_share": 0.25,
}
"""``Policy.progressive``'s settings (harness9's ratio tiers). The claude-code floors tuned
for cost (``schedule_floor_exponent``, ``offload_chars_per_token``, ``schedule_floor_share``
0.2) are off or as before: untuned here. ``identifier_share`` 0.025 (claude-code 0.0125):
identifier lists of up to 800 tokens at 32k and a 40th of the budget above (a summary's half
bounds them), 400 at 16k and under as before; on the tuning half at 32k recall 0.9754 →
0.9784 for 0.834 → 0.837× harness's cost, 8k and 16k unchanged (bench-notes/quality5-final.md).
Its summaries have no "what the agent concluded" section: it summarizes far more often,
and on the tuning half the section gave no recall at 32k for 1.3% more cost (at 8k +0.005 for +9%).
``compact_min_fresh_share`` 0.3: its soft step fired whenever the prompt passed 70% of the
budget, and each time rewrote the merged summary to take in a round or two, about every
third turn at 8k; waiting until the new rounds hold 30% of the budget cut its cost on the
tune half (``bench-notes/quality5.md``)."""
COLLAPSE_FIRST_CASCADE = (
    "offload",
    "rereads",
    "microcompact",
    "budget_reduction",
    "collapse",
    "compact",
    "snip",
    "emergency",
)
"""The claude-code tiers with collapse before auto-compact (the preset's order until the
bench measured the other better): short layers a story, a notebook or a test rolls back."""

DEFAULT_COMPACTABLE: dict[str, str] = {
    "read": "read",
    "fileread": "read",
    "read_file": "read",
    "open": "read",
    "view": "read",
    "cat": "read",
    "notebookread": "read",
    "bash": "shell",
    "shell": "shell",
    "exec_command": "shell",
    "execute": "shell",
    "run": "shell",
    "local_shell": "shell",
    "powershell": "shell",
    "python": "shell",
    "grep": "grep",
    "search": "grep",
    "search_file": "grep",
    "search_dir": "grep",
    "find_file": "glob",
    "glob": "glob",
    "ls": "glob",
    "webfetch": "web",
    "web_fetch": "web",
    "websearch": "web",
    "web_search": "web",
    "fetch": "web",
    "edit": "edit",
    "multiedit": "edit",
    "fileedit": "edit",
    "str_replace_editor": "edit",
    "str_replace_based_edit_tool": "edit",
    "apply_patch": "edit",
    "notebookedit": "edit",
    "write": "write",
    "filewrite": "write",
    "create": "write",
}
