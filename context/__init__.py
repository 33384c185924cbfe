"""Render a conversation graph into an LLM prompt under a token budget.

The cascade (offload, budget reduction, microcompact, collapse, snip, auto-compact,
emergency; ``recover`` on a provider's overflow error) works on views of the graph and
never changes a stored node. Collapses and compactions are layers: graph facts that can
be listed, expanded and rolled back.
"""

from ._budget._anchor import UsageAnchor
from ._budget._cut import middle_truncate
from ._budget._models import ModelInfo, import_litellm, is_anthropic, model_info, model_map_path
from ._budget._names import (
    LAYER_KINDS,
    TIER_NAMES,
    LayerKind,
    RecordTier,
    TierName,
    as_layer_kind,
    as_record_tier,
    as_tier,
)
from ._budget._policy import MAX_TOKENS, Policy
from ._budget._policy_sources import POLICY_SCHEMA
from ._budget._presets import COLLAPSE_FIRST_CASCADE, DEFAULT_COMPACTABLE
from ._budget._readback import HISTORY_TOOLS
from ._budget._redaction import output_redactor, summary_redactor
from ._budget._schedule import cache_schedule, cost_per_turn, plan_for
from ._budget._tokens import TokenCache, TokenCounter, encoding_name_for
from ._commit._hooks import Committed
from ._commit._writer import SessionWriter
from ._engine import ContextEngine
from ._errors import (
    AlreadyRolledBack,
    BudgetFloorWarning,
    CommitConflict,
    ContextError,
    ContextOverflowError,
    CopiedDatabase,
    ForeignStateFolder,
    OffloadError,
    PolicyError,
    RecordError,
    StateDirError,
    SummaryError,
    TokenizerError,
    UnknownLayer,
    UnknownModel,
)
from ._ops._recovery import is_context_overflow, reported_tokens
from ._prefix import equal_prefix, same_prefix
from ._render._integrity import (
    provider_roles,
    repair_tool_pairs,
    tool_pair_problems,
    unique_call_ids,
)
from ._render._rendered import Rendered, SentPrompt, sent_prompt
from ._render._request import RenderRequest
from ._renders import render_context, render_receipt
from ._store._adopt import Adoption, adopt_state_folder
from ._store._facts import LayerFacts, RecordFacts, RollbackFacts
from ._store._folder import StateFolder, release_state_folder, state_folder, state_home
from ._store._migrate import StateMigration, migrate_state
from ._store._receipt import (
    ProviderUsage,
    RenderReceipt,
    canonical_message,
    message_digest,
    tools_digest,
)
from ._store._records import CompactionRecord, read_jsonl, records_path
from ._store._removal import Removal
from ._store._scrub import ScrubRefused, scrub_session
from ._store._sessions import collect_garbage, delete_session
from ._store._source import MessageSource
from ._store._storage import CONTEXT_MIGRATIONS, ContextStorage
from ._summaries._heuristic import HeuristicSummarizer
from ._summaries._identifiers import rank_identifiers
from ._summaries._litellm_summarizer import LiteLLMSummarizer
from ._summaries._summary import (
    ANCHOR_TITLES,
    Anchors,
    Summarizer,
    SummaryRequest,
    SummaryResult,
    anchors_from_dict,
    parse_summary,
)
from ._tiers._book import LAYER_TOTALS
from ._tiers._offload import offload_path
from ._tiers._provider import request_options as provider_request_options
from ._tiers._registry import TIERS, resolve_tiers
from ._tiers._rereads import read_target, write_target
from ._tiers._tier import (
    Action,
    NoState,
    OffloadFile,
    RenderInputs,
    Tier,
    TierContext,
    TierDecisions,
    TierServices,
    TierState,
)
from ._view import RESULT_VARIANTS, Item, Unit, Variant, View

__all__ = [
    "ANCHOR_TITLES",
    "COLLAPSE_FIRST_CASCADE",
    "CONTEXT_MIGRATIONS",
    "DEFAULT_COMPACTABLE",
    "HISTORY_TOOLS",
    "LAYER_KINDS",
    "LAYER_TOTALS",
    "MAX_TOKENS",
    "POLICY_SCHEMA",
    "RESULT_VARIANTS",
    "TIERS",
    "TIER_NAMES",
    "Action",
    "Adoption",
    "AlreadyRolledBack",
    "Anchors",
    "BudgetFloorWarning",
    "CommitConflict",
    "Committed",
    "CompactionRecord",
    "ContextEngine",
    "ContextError",
    "ContextOverflowError",
    "ContextStorage",
    "CopiedDatabase",
    "ForeignStateFolder",
    "HeuristicSummarizer",
    "Item",
    "LayerFacts",
    "LayerKind",
    "LiteLLMSummarizer",
    "MessageSource",
    "ModelInfo",
    "NoState",
    "OffloadError",
    "OffloadFile",
    "Policy",
    "PolicyError",
    "ProviderUsage",
    "RecordError",
    "RecordFacts",
    "RecordTier",
    "Removal",
    "RenderInputs",
    "RenderReceipt",
    "RenderRequest",
    "Rendered",
    "RollbackFacts",
    "ScrubRefused",
    "SentPrompt",
    "SessionWriter",
    "StateDirError",
    "StateFolder",
    "StateMigration",
    "Summarizer",
    "SummaryError",
    "SummaryRequest",
    "SummaryResult",
    "Tier",
    "TierContext",
    "TierDecisions",
    "TierName",
    "TierServices",
    "TierState",
    "TokenCache",
    "TokenCounter",
    "TokenizerError",
    "Unit",
    "UnknownLayer",
    "UnknownModel",
    "UsageAnchor",
    "Variant",
    "View",
    "adopt_state_folder",
    "anchors_from_dict",
    "as_layer_kind",
    "as_record_tier",
    "as_tier",
    "cache_schedule",
    "canonical_message",
    "collect_garbage",
    "cost_per_turn",
    "delete_session",
    "encoding_name_for",
    "equal_prefix",
    "import_litellm",
    "is_anthropic",
    "is_context_overflow",
    "message_digest",
    "middle_truncate",
    "migrate_state",
    "model_info",
    "model_map_path",
    "offload_path",
    "output_redactor",
    "parse_summary",
    "plan_for",
    "provider_request_options",
    "provider_roles",
    "rank_identifiers",
    "read_jsonl",
    "read_target",
    "records_path",
    "release_state_folder",
    "render_context",
    "render_receipt",
    "repair_tool_pairs",
    "reported_tokens",
    "resolve_tiers",
    "same_prefix",
    "scrub_session",
    "sent_prompt",
    "state_folder",
    "state_home",
    "summary_redactor",
    "tool_pair_problems",
    "tools_digest",
    "unique_call_ids",
    "write_target",
]
