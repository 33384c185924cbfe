"""``Policy``: every threshold of the compaction cascade, in one validated model.

``Policy()`` suits a 128k-window model. Give ``model=`` to read the window and output limit
from litellm's bundled model map; give ``context_window``/``max_output_tokens`` to override.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._errors import PolicyError, UnknownModel
from ._models import is_anthropic, model_info

TIER_NAMES = ("offload", "budget_reduction", "microcompact", "snip", "emergency")

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


class Policy(BaseModel):
    """Thresholds of every tier; all configurable, all validated.

    >>> Policy().budget
    111616
    >>> Policy(context_window=32_000, max_output_tokens=4_000).budget
    28000
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "claude-code"
    model: str | None = None
    context_window: int = Field(default=128_000, gt=0)
    max_output_tokens: int = Field(default=16_384, ge=0)
    cascade: tuple[str, ...] = TIER_NAMES
    always: tuple[str, ...] = ("offload", "budget_reduction")
    """Tiers that run every turn, fitting or not (their output is byte-stable)."""

    state_dir: Path = Path(".openprogram")
    """Offloaded outputs and records go under this folder."""

    budget_reduction_chars: int = Field(default=4_000, gt=0)
    reduction_head_chars: int = Field(default=2_400, ge=0)
    reduction_tail_chars: int = Field(default=1_600, ge=0)

    offload_chars: int = Field(default=10_000, gt=0)
    offload_preview_lines: int = Field(default=10, ge=0)
    offload_preview_line_chars: int = Field(default=240, gt=0)

    microcompact_keep: int = Field(default=5, ge=0)
    microcompact_first: int = Field(default=50, ge=1)
    microcompact_every: int = Field(default=25, ge=1)
    microcompact_idle_minutes: float = Field(default=60.0, gt=0)
    compactable_tools: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_COMPACTABLE))
    cache_edits: Literal["auto", "on", "off"] = "auto"
    """Anthropic's ``clear_tool_uses`` edits instead of rewriting messages (auto: Claude)."""

    snip_low_water: float = Field(default=0.6, gt=0, lt=1)
    """Snip drops rounds until the prompt is under this share of the budget (hysteresis)."""

    emergency_stub_chars: int = Field(default=160, gt=0)
    callers: int | None = Field(default=None, ge=0)
    """Caller-chain units a frame render keeps before the function's entry (None: all)."""

    merge_same_role: Literal["auto", "on", "off"] = "auto"
    """Merge consecutive same-role messages (auto: for Anthropic models)."""

    @model_validator(mode="after")
    def _check(self) -> Policy:
        unknown = [t for t in (*self.cascade, *self.always) if t not in TIER_NAMES]
        if unknown:
            raise PolicyError(f"cascade: unknown tier(s) {unknown}; known: {list(TIER_NAMES)}")
        if self.reduction_head_chars + self.reduction_tail_chars > self.budget_reduction_chars:
            raise PolicyError(
                "reduction_head_chars + reduction_tail_chars must not exceed "
                "budget_reduction_chars, or reduction would not shorten anything"
            )
        if self.max_output_tokens >= self.context_window:
            raise PolicyError("max_output_tokens must be smaller than context_window")
        return self

    @classmethod
    def for_model(cls, model: str, **overrides: object) -> Policy:
        """A policy whose window and output limit come from litellm's model map."""
        try:
            info = model_info(model)
        except UnknownModel as error:
            raise PolicyError(str(error)) from error
        window = info.max_input_tokens or 128_000
        output = min(info.max_output_tokens or 16_384, 32_000, window // 4)
        values: dict[str, object] = {
            "model": model,
            "context_window": window,
            "max_output_tokens": output,
        }
        values.update(overrides)
        return cls.model_validate(values)

    @property
    def budget(self) -> int:
        """Prompt tokens allowed: the window less the room kept for the answer."""
        return self.context_window - self.max_output_tokens

    @property
    def anthropic(self) -> bool:
        return self.model is not None and is_anthropic(self.model)

    @property
    def use_cache_edits(self) -> bool:
        return self.cache_edits == "on" or (self.cache_edits == "auto" and self.anthropic)

    @property
    def merge_roles(self) -> bool:
        return self.merge_same_role == "on" or (self.merge_same_role == "auto" and self.anthropic)

    def tool_category(self, name: str) -> str | None:
        """The compactable category of a tool name (case-insensitive), or None."""
        return self.compactable_tools.get(name.lower())
