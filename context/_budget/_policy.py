"""``Policy``: every threshold of the compaction cascade, in one validated model.

Two presets: :meth:`Policy.claude_code` (the tier cascade with Claude Code's thresholds;
``Policy()`` is this preset for a 128k model) and :meth:`Policy.progressive` (harness9's
ratio tiers). Give ``model=`` and the window and output limit are read from litellm's
bundled model map. Every field can also be set through an ``OPENPROGRAM_<FIELD>``
environment variable; values given in code win over the environment.

The environment and the model map are read when a policy is made. A session stores its
policy (:meth:`Policy.stored`, with :data:`POLICY_SCHEMA`) and a reopened session restores
it as stored (:meth:`Policy.restore`): neither the environment nor a newer model map
changes it then, only an explicit ``Session.configure`` / ``openprogram configure``.
Where offloaded outputs go is not a setting of the policy: it is the database's state
folder (``context._store._folder``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from .._errors import PolicyError
from ._models import is_anthropic
from ._names import as_tier
from ._policy_checks import check_policy
from ._policy_sources import POLICY_SCHEMA, filled, restoring, stored_values
from ._policy_text import fields_doc, policy_error, with_model
from ._presets import CLAUDE_CODE_CASCADE, DEFAULT_COMPACTABLE, PROGRESSIVE_VALUES
from ._readback import is_history_tool

MAX_TOKENS = 10**15
"""The largest window or budget accepted: far past any model, and small enough that token
arithmetic in floats stays exact (a budget of 10**400 overflowed a float at render)."""

Count = Annotated[int, Field(strict=True, le=MAX_TOKENS)]
"""A count or size: an int (not a bool, text or float) of at most ``MAX_TOKENS``."""

MIN_SUMMARY_REQUEST = 1_000
"""Tokens a summary request may always use, however small the budget: less says nothing."""


class Policy(BaseModel):
    """Thresholds of every tier; all configurable, all validated.

    Counts and sizes are strict ints up to ``MAX_TOKENS``: ``True``, ``"1000"`` or ``2.0``
    is a :class:`PolicyError`, never silently read as 1, 1000 or 2.

    >>> Policy().budget
    98816
    >>> Policy(context_window=32_000, max_output_tokens=4_000).budget
    24800
    >>> Policy(model="gpt-3.5-turbo").context_window
    16385
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str = "claude-code"
    """The preset this policy was made from (claude-code, progressive), for records and display."""
    model: str | None = None
    """The litellm model name: its window, output limit and tokenizer (None: the 128k default)."""
    context_window: Count = Field(default=128_000, gt=0)
    """The model's context window in tokens (from litellm's model map when ``model`` is given)."""
    max_output_tokens: Count = Field(default=16_384, ge=0)
    """Tokens kept free for the answer: the budget is the window less this and ``buffer_tokens``."""
    buffer_tokens: Count = Field(default=13_000, ge=0)
    """Room kept free besides the answer (Claude Code's 13k), at most a tenth of the window."""
    cascade: tuple[str, ...] = CLAUDE_CODE_CASCADE
    """The tiers a render runs, in order, until the prompt fits."""
    always: tuple[str, ...] = ("offload",)
    """Tiers whose ``compact`` runs every turn, fitting or not (their output is byte-stable).
    Budget reduction is not among them by default: reducing only once the prompt does not
    fit (and from then on, sticky) keeps recent outputs whole — the bench measured recall
    0.974 against 0.958 on the shared traces at 32k, for the same prefix reuse."""
    triggers: dict[str, float] = Field(default_factory=dict)
    """Share of the budget above which a tier acts (default 1.0: only when over budget)."""

    budget_reduction_chars: Count = Field(default=4_000, gt=0)
    """Budget reduction cuts a tool output longer than this many characters…"""
    reduction_head_chars: Count = Field(default=2_400, ge=0)
    """…keeping its first this many characters…"""
    reduction_tail_chars: Count = Field(default=1_600, ge=0)
    """…and its last this many, with a marker between."""

    offload_chars: Count = Field(default=20_000, gt=0)
    """Outputs longer than this go to a file every turn (the prompt keeps head and tail);
    20k rather than the seed's 10k: below it, reducing when needed loses less (bench)."""
    offload_chars_per_token: float | None = Field(default=1.0, gt=0)
    """...or this many characters per token of the budget, if fewer (None: ``offload_chars``
    only): at 8k a 4k-token output is half the prompt, kept whole under the fixed 20k
    characters. Alone on TUNE's 29 Claude Code sessions (bench-notes/quality5-cost.md):
    recall at 8k 0.8537 → 0.8699, at 16k 0.9516 → 0.9564, at cost 0.981 → 1.002 and
    1.065 → 1.057× harness; 32k and up unchanged."""
    offload_chars_min: Count = Field(default=8_000, gt=0)
    """...but never under this many characters: under a toy budget (2k) every modest output
    would go to a file, the prompt keeping only pointers to read back."""
    offload_share: float | None = Field(default=0.25, gt=0, le=1)
    """...and only when they are also over this share of the budget (in tokens): in a large
    window a long file read stays whole — at 160k, recall on the Claude Code traces rose
    from 0.955–0.974 to 0.982–0.985 (bench, at 0.15). A quarter, the largest output the
    peer (pydantic-ai-harness) keeps whole: once older outputs are cleared first, the newest
    output is what the agent quotes next (at 32k, 0.15 → 0.25: recall 0.9768 → 0.9792)."""
    offload_tokens: Count | None = Field(default=16_000, gt=0)
    """...or over this many tokens, if fewer (None: the share only): at 160k one 50k output
    no longer forces an early compaction (bench-notes/quality5.md)."""
    offload_preview_head_chars: Count = Field(default=2_400, ge=0)
    """An offloaded output's preview in the prompt: its first this many characters…"""
    offload_preview_tail_chars: Count = Field(default=1_600, ge=0)
    """…and its last this many."""

    # -- issue 34's levers (how they work: context._tiers._asked and _working) -------------
    offload_asked_share: float | None = Field(default=0.5, ge=0, lt=1)
    """Share of an offloaded output's preview given to lines of its hidden middle that name
    what the call asked for (its arguments, its message's text); None or 0: head and tail."""
    working_set_tokens: Count = Field(default=0, ge=0)
    """Most tokens of the working set: lines of the compacted history that the rounds kept
    after the newest compaction name, shown after its summary; 0 (default: on the TUNE half
    it gave no recall for 1-1.4% more cost, bench-notes/quality5-levers.md) turns it off..."""
    working_set_share: float = Field(default=0.0125, gt=0, le=1)
    """...and at most this share of the budget (100 tokens at 8k, 400 at 32k)."""

    microcompact_keep: Count = Field(default=5, ge=0)
    """Microcompact keeps this many newest compactable outputs whole."""
    microcompact_first: Count = Field(default=1, ge=1)
    """The tool-call count at which microcompact first clears (see ``microcompact_every``)."""
    microcompact_every: Count = Field(default=1, ge=1)
    """Microcompact clears at these tool-call counts (first, then every), when the prompt
    is over budget. 1 and 1 (Claude Code: 50 and 25): whenever it is over budget and a tool
    call came since the last clearing, as the peer's ``ClearToolResults`` does. Each clearing
    takes all but the newest outputs at once, so the next one waits until the prompt has
    filled again: the prefix before it stays byte-stable."""
    microcompact_idle_minutes: float = Field(default=60.0, gt=0)
    """Minutes without a turn after which microcompact clears old outputs (the cache is cold)."""
    compactable_tools: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_COMPACTABLE))
    """Tools whose old outputs microcompact may clear: name → kind (read, shell, grep, …)."""
    cache_edits: Literal["auto", "on", "off"] = "auto"
    """Anthropic's ``clear_tool_uses`` edits instead of rewriting messages (auto: Claude)."""

    collapse_min_rounds: Count = Field(default=5, ge=1)
    """Fewest rounds a collapse segment covers…"""
    collapse_max_rounds: Count = Field(default=10, ge=1)
    """…and the most."""
    collapse_summary_tokens: Count = Field(default=300, gt=0)
    """Tokens a collapse segment's summary is asked to fit in."""
    low_water: float = Field(default=0.75, gt=0, le=1)
    """Once a render is over budget, the cascade goes on until the prompt is under this
    share of the budget (hysteresis: the next turns append under a stable prefix)..."""
    working_tokens: Count | None = Field(default=24_000, gt=0)
    """...or under this many tokens, if fewer: a large window is not refilled to the brim
    after a compaction (each turn re-reads the whole prompt; the bench's cost figure)."""
    compact_tokens: Count | None = Field(default=80_000, gt=0)
    """Auto-compact also starts once the prompt passes this many tokens, under budget. Every
    call re-reads the whole prompt, so in a large window a prompt held between
    ``working_tokens`` and this costs less than one kept near the window, for what the
    model uses: at 160k on the Claude Code traces, cost 0.62–1.00× their own compactions'
    at recall ≥ 0.98 (bench). None: only the budget triggers it."""
    schedule: Literal["working", "cache"] = "cache"
    """How a triggered cascade picks its low-water mark and when auto-compact acts.
    ``working``: down to ``low_water`` of the budget or ``working_tokens``, when the prompt
    passes the budget (or ``compact_tokens``). ``cache``: down to ``schedule_floor_tokens``,
    when the cache-weighted cost per turn says so (:func:`context.cache_schedule`: a compaction
    rewrites the prompt after the pinned prefix, each turn after reads what it kept)."""
    schedule_floor_tokens: Count = Field(default=16_000, gt=0)
    """The cache schedule's recall floor: a compaction keeps at least this many tokens...
    (the cost alone would always keep fewer: see :func:`context.cache_schedule`)"""
    schedule_floor_exponent: float | None = Field(default=0.8, gt=0, le=1)
    """...times (budget / ``schedule_floor_budget``) to this power under that budget (None:
    fixed): under a tight budget the low-water cap (``low_water``) kept 75% and every kept
    token is re-read each turn, for ever less recall. 5.3k and 9.2k kept at 8k and 16k
    (were 6k, 12k); 32k and up unchanged. With ``offload_chars_per_token``, on TUNE's 29
    Claude Code sessions (bench-notes/quality5-cost.md), recall vs harness / cost vs
    harness: 8k −0.0013 / 0.981 → +0.0093 / 0.908; 16k +0.037 / 1.065 → +0.032 / 0.982."""
    schedule_floor_budget: Count = Field(default=32_000, gt=0)
    """The budget from which the floor is ``schedule_floor_tokens`` itself."""
    schedule_floor_share: float | None = Field(default=0.2, gt=0, le=1)
    """...or this share of the budget, if more, and never over ``low_water`` of it: binds
    from 80k up, 32k kept at 160k (None: the tokens only; 0.25 before ``identifier_share``
    paid for the 8k less: bench-notes/quality5-final.md)."""
    cache_read_price: float = Field(default=0.1, gt=0)
    """A cached prompt token's price against an uncached one (Anthropic's 0.1)..."""
    cache_write_price: float = Field(default=1.25, gt=0)
    """...and a token written to the cache (Anthropic's 1.25), for the cache schedule."""
    payoff_share: float = Field(default=0.3, ge=0, lt=1)
    """A collapse or compaction is made only if it saves at least this share of the tokens it
    summarizes for the first time (for an incremental compaction: the new rounds, not the
    previous summary it merges); a manual ``compact`` is exempt."""
    payoff_retry_tokens: Count = Field(default=2_000, ge=0)
    """A part whose summary did not pay is not summarized again by the budget until it has
    grown by this many tokens (each try is a summarizer call)."""
    collapse_keep_recent: Count = Field(default=6, ge=1)
    """The newest units are never collapsed (the model is working on them)."""
    identifier_tokens: Count = Field(default=400, ge=0)
    """Cap of a summary's identifier list per segment (never over half the summary); 0 turns
    the lists off. 400 rather than the issue's 80: recall at 32k rose 0.975 → 0.977
    (claude-code) and 0.949 → 0.958 (progressive), at 160k on 8e 0.968 → 0.984 (bench)."""
    identifier_share: float | None = Field(default=0.0125, gt=0, lt=1)
    """...or this share of the budget, if more (None: the tokens only), for summaries and
    placeholders alike: 2,000 at 160k (a summary's half bounds it), 32k and under as
    before. It pays for keeping less there (``schedule_floor_share``; at 32k 0.025 with a
    14k floor cost prefix reuse): bench-notes/quality5-final.md."""
    conclusion_tokens: Count = Field(default=120, ge=0)
    """Cap of a summary's "what the agent concluded" section (never over a third of the
    summary): the agent's own findings, decisions, files and next steps, those naming
    identifiers used again later first. 0 turns the section off. One bound per summary,
    not per segment: the section is written output. 120 on the tune half (bench, claude-code
    under the cache schedule): recall at 8k/16k/32k up 0.0040/0.0006/0.0000 for 1.5/0.8/0.7%
    more cost (60: less recall, 240: more cost)."""
    stub_identifier_share: float | None = Field(default=0.05, gt=0, lt=1)
    """A cleared output's placeholder and an offloaded output's preview list the identifiers
    the text they hide mentions, in this share of its tokens (at most ``identifier_tokens``;
    0 there turns these off too): the model sees what each hidden output holds, to read back
    the one it needs. At 32k on the 13 traces, recall 0.9851 to 0.9902 at 1.007x the cost
    (bench). None: bare placeholders."""
    proactive_share: float | None = Field(default=0.7, gt=0, le=1)
    """With an LLM summarizer, compute collapse summaries ahead of need from this share of
    the budget, off the hot path (None: only when needed); compaction summaries from this
    share of the compact tier's threshold."""
    summary_wait: Literal["always", "never"] = "always"
    """``always``: a render the budget needs a summary for waits for it, so what a render
    shows never depends on timing. ``never`` (opt-in): a summary not ready yet is prepared
    on the worker and the render goes out with the cheaper tiers, still within the budget;
    the next render adopts it. Each receipt says which happened (``RenderReceipt.summary``)."""
    summarizer_model: str | None = None
    """A litellm model for summaries (a cheaper one than the agent's), used when no
    summarizer is given; None: the offline heuristic summarizer."""

    snip_low_water: float = Field(default=0.6, gt=0, lt=1)
    """Snip drops rounds until the prompt is under this share of the budget (hysteresis)."""

    compact_min_fresh_share: float | None = Field(default=None, gt=0, lt=1)
    """A budget compaction is not asked for while the rounds it would summarize for the
    first time hold less than this share of the budget: each one rewrites the summary it
    merges (charged in and out) and the prompt after the pinned prefix, so one that takes
    in a little costs more than it saves. None: whatever they hold (progressive: 0.3)."""
    compact_keep_rounds: Count = Field(default=2, ge=0)
    """Auto-compact keeps at least the newest rounds as they are..."""
    compact_keep_share: float = Field(default=0.5, ge=0, le=1)
    """...and more of the newest, up to this share of the low-water mark."""
    compact_keep_messages: Count | None = Field(default=None, ge=0)
    """Keep (at least) this many newest messages instead (progressive: 6)."""
    compact_user_tokens: Count = Field(default=4_000, ge=0)
    """Recent user messages kept verbatim in a compaction, newest first, within this."""
    compact_summary_tokens: Count = Field(default=3_000, gt=0)
    """What a compaction's summary may use..."""
    compact_summary_share: float | None = Field(default=0.1, gt=0, lt=1)
    """...or this share of the prompt tokens it replaces for the first time, if more (at
    most a third of the low-water mark): a compaction at 80k in a large window replaces
    five times what one at a 32k budget does, and 3,000 tokens kept too few of its
    identifiers (160k, bench: 8e recall 0.9836 to 0.9862, cd 0.9858 to 0.9910). None: the
    fixed size only."""
    backlog_budgets: float | None = Field(default=4.0, gt=0)
    """A first render (no tier state, no layers) of a history estimated at more than this many
    budgets makes one compaction of everything before the newest rounds, in a few bounded
    summary requests, instead of deciding every tier over the whole history (``_backlog``).
    None: the cascade works through it."""
    backlog_request_tokens: Count = Field(default=4_000, gt=0)
    """What each of a backlog's summary requests reads at most (estimated tokens): a sample
    of its part of the history, newest first, long texts clipped to their ends."""
    redact_summaries: bool = True
    """What goes to a summarizer has secrets (keys, tokens, private keys) redacted first."""
    redact_patterns: dict[str, str] = Field(default_factory=dict)
    """Extra ``{kind: regex}`` patterns for the redactor (the defaults stay on)."""
    redact_outputs: bool = False
    """Offloaded files and the history tools' answers are redacted too (always, when the
    graph redacts what it stores)."""
    summary_shares_prefix: bool = True
    """A summary request carries the agent's system prompt (and tool schemas), which an LLM
    summarizer on the agent's own model sends first, to reuse its cached prefix."""

    provider_compaction: Literal["off", "anthropic"] = "off"
    """Hand compaction to the provider (Anthropic's ``compact_20260112`` edit); the block
    it returns is kept as a layer (see ``_provider``)."""
    provider_compact_tokens: Count | None = Field(default=None, gt=0)
    """Input tokens at which the provider compacts (default: the low-water mark)."""

    emergency_stub_chars: Count = Field(default=160, gt=0)
    """Characters of a round the emergency tier keeps as its stub."""
    recover_budget_factor: float = Field(default=0.8, gt=0, lt=1)
    """Each ``recover`` after an overflow error renders under this share of the last budget."""
    recover_max_failures: Count = Field(default=3, ge=1)
    """Overflow recoveries failed in a row after which the circuit breaker stops retrying."""
    callers: Count | None = Field(default=None, ge=0)
    """Caller-chain units a frame render keeps before the function's entry (None: all)."""

    merge_same_role: Literal["auto", "on", "off"] = "auto"
    """Merge consecutive same-role messages (auto: for Anthropic models)."""

    summary_item_chars: Count = Field(default=2_000, ge=500)
    """A summary request sends each text (a message, a call's long argument) over this many
    characters as its head and tail (C9: requests are bounded; identifiers are still ranked
    from the whole texts, locally)..."""
    summary_request_tokens: Count | None = Field(default=6_000, gt=0)
    """...and halves that bound (down to 500 characters), then samples the covered rounds,
    while the covered conversation is over this many tokens (None: only the per-text
    bound)..."""
    summary_request_share: float | None = Field(default=0.2, gt=0, le=1)
    """...or over this share of the render's budget, when that is less: a summary request
    is an extra call for each compaction, so under a small budget it stays small beside
    the prompt it relieves, though never under ``MIN_SUMMARY_REQUEST`` tokens (None: only
    ``summary_request_tokens``)."""

    @model_validator(mode="before")
    @classmethod
    def _fill(cls, data: Any) -> Any:
        return filled(cls.model_fields, data) if isinstance(data, dict) else data

    @model_validator(mode="after")
    def _check(self) -> Policy:
        check_policy(self)
        return self

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as error:
            raise policy_error(error) from None

    # -- presets ------------------------------------------------------------------------
    @classmethod
    def claude_code(cls, model: str | None = None, **overrides: Any) -> Policy:
        """The tier cascade with Claude Code's thresholds: offload every turn, then rereads,
        microcompact (old outputs cleared as a batch), auto-compact, collapse (what a
        compaction declined), budget reduction, snip and emergency, each only while the
        prompt is over the budget (window − output reserve − buffer)."""
        return cls(**with_model({"name": "claude-code", **overrides}, model))

    @classmethod
    def progressive(cls, model: str | None = None, **overrides: Any) -> Policy:
        """harness9's ratio tiers: nothing under 60% of the budget; offload from 60%; from
        70% summarize the oldest half; from 80% summarize all but the last 6 messages, with
        anchors; from 95% emergency truncation without an LLM (``PROGRESSIVE_VALUES``;
        issue 34's claude-code levers, the working set and asked-for preview lines, are off
        here)."""
        return cls(**with_model({**PROGRESSIVE_VALUES, **overrides}, model))

    @classmethod
    def named(cls, name: str, model: str | None = None, **overrides: Any) -> Policy:
        """A preset by name: ``claude-code`` or ``progressive``."""
        presets = {"claude-code": cls.claude_code, "progressive": cls.progressive}
        if name not in presets:
            raise PolicyError(f"unknown policy {name!r}; presets: {', '.join(presets)}")
        return presets[name](model, **overrides)

    # -- stored with a session ----------------------------------------------------------
    def stored(self) -> dict[str, Any]:
        """Every setting as JSON values, with the schema version, for a session to keep."""
        return {"schema": POLICY_SCHEMA, "values": self.model_dump(mode="json")}

    @classmethod
    def restore(cls, stored: dict[str, Any]) -> Policy:
        """A stored policy as it was stored: no ``OPENPROGRAM_*`` variable and no model
        map lookup applies. A setting added since takes its default; one since removed
        is dropped.

        >>> policy = Policy(context_window=32_000, low_water=0.6)
        >>> Policy.restore(policy.stored()) == policy
        True
        """
        known = stored_values(stored, cls.model_fields)
        with restoring():
            return cls(**known)

    # -- derived ------------------------------------------------------------------------
    @property
    def budget(self) -> int:
        """Prompt tokens allowed: the window less the answer's room and the buffer."""
        buffer = min(self.buffer_tokens, self.context_window // 10)
        return max(1, self.context_window - self.max_output_tokens - buffer)

    def target(self, budget: int) -> int:
        """The low-water mark a cascade shrinks to once triggered (see ``low_water``)."""
        share = int(budget * self.low_water)
        return share if self.working_tokens is None else min(share, self.working_tokens)

    @property
    def offload_preview(self) -> tuple[int, int]:
        """(head, tail) characters an offloaded output shows: the configured ones, scaled
        down to half of ``offload_chars`` when they would not be shorter than it."""
        head, tail = self.offload_preview_head_chars, self.offload_preview_tail_chars
        room = self.offload_chars // 2
        if head + tail > room:
            scale = room / (head + tail)
            head, tail = int(head * scale), int(tail * scale)
        return head, tail

    def summary_request_bound(self, budget: int) -> int | None:
        """Tokens a summary request's conversation may use under ``budget``.

        >>> policy = Policy()
        >>> policy.summary_request_bound(32_000), policy.summary_request_bound(8_000)
        (6000, 1600)
        """
        bounds = [self.summary_request_tokens]
        if self.summary_request_share is not None:
            bounds.append(max(MIN_SUMMARY_REQUEST, int(budget * self.summary_request_share)))
        return min((b for b in bounds if b is not None), default=None)

    def compact_summary_bound(self, replaced: int, target: int) -> int:
        """Tokens a compaction's summary may use when it replaces ``replaced`` prompt tokens
        for the first time, under the low-water mark ``target``.

        >>> bound = Policy().compact_summary_bound
        >>> bound(15_000, 24_000), bound(60_000, 24_000), bound(200_000, 24_000)
        (3000, 6000, 8000)
        """
        wanted = self.compact_summary_tokens
        if self.compact_summary_share is not None:
            wanted = max(wanted, int(replaced * self.compact_summary_share))
        return min(wanted, max(100, target // 3))

    def identifier_cap(self, budget: int) -> int:
        """Tokens a summary's identifier list may use per segment under ``budget``.

        >>> cap = Policy().identifier_cap
        >>> cap(16_000), cap(32_000), cap(160_000)
        (400, 400, 2000)
        """
        if self.identifier_tokens == 0 or self.identifier_share is None:
            return self.identifier_tokens
        return max(self.identifier_tokens, int(budget * self.identifier_share))

    def stub_identifier_tokens(self, hidden: int, budget: int = 0) -> int:
        """Tokens a placeholder's identifier list may use for the ``hidden`` tokens it hides
        under ``budget`` (the engine's nominal one: a placeholder never changes).

        >>> stub = Policy().stub_identifier_tokens
        >>> stub(2_000), stub(50_000), stub(50_000, 32_000), stub(50_000, 160_000)
        (100, 400, 400, 2000)
        """
        if self.stub_identifier_share is None:
            return 0
        return min(self.identifier_cap(budget), int(hidden * self.stub_identifier_share))

    def trigger(self, tier: str) -> float:
        """Share of the budget above which ``tier`` acts (0 for tiers that run always)."""
        if tier in self.always:
            return 0.0
        return self.triggers.get(tier, 1.0)

    def threshold(self, tier: str, budget: int) -> float:
        """Prompt tokens above which ``tier`` acts under ``budget``.

        >>> policy = Policy()
        >>> policy.threshold("compact", 32_000), policy.threshold("compact", 160_000)
        (32000.0, 80000)
        """
        share = self.trigger(tier) * budget
        if as_tier(tier) == "compact" and self.compact_tokens is not None:
            return min(share, self.compact_tokens)
        return share

    def offloads(self, chars: int, tokens: int, budget: int) -> bool:
        """Whether an output of ``chars`` characters (``tokens`` tokens) goes to a file."""
        share, cap = self.offload_share, self.offload_tokens
        limit = -1.0 if share is None else min(share * budget, cap or MAX_TOKENS)
        floor = self.offload_chars
        if self.offload_chars_per_token is not None:
            scaled = max(self.offload_chars_min, int(self.offload_chars_per_token * budget))
            floor = min(floor, scaled)
        return chars > floor and tokens > limit

    @property
    def fingerprint(self) -> str:
        """A hash of every setting: persisted tier state is reused only under the same one."""
        data = self.model_dump(mode="json")
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

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
        """The compactable category of a tool name (case-insensitive), or None; never one
        for a history tool (its result is a page of what is stored: clearing it points
        back at itself)."""
        if is_history_tool(name):
            return None
        return self.compactable_tools.get(name.lower())


Policy.__doc__ = (Policy.__doc__ or "") + fields_doc(Policy)
