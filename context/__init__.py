"""Render a conversation graph into an LLM prompt under a token budget.

The cascade (offload, budget reduction, microcompact, snip, emergency; collapse and
auto-compact join later) works on views of the graph and never changes a stored node.
"""

from ._engine import TIERS, ContextEngine, Rendered, render_context
from ._errors import (
    ContextError,
    OffloadError,
    PolicyError,
    RecordError,
    TokenizerError,
    UnknownModel,
)
from ._heuristic import HeuristicSummarizer
from ._identifiers import rank_identifiers
from ._integrity import provider_roles, repair_tool_pairs, tool_pair_problems, unique_call_ids
from ._litellm_summarizer import LiteLLMSummarizer
from ._models import ModelInfo, is_anthropic, model_info
from ._offload import offload_path
from ._policy import DEFAULT_COMPACTABLE, TIER_NAMES, Policy
from ._records import CompactionRecord, read_jsonl, records_path, select_records
from ._reduce import middle_truncate
from ._sessions import delete_session
from ._summary import (
    ANCHOR_TITLES,
    Anchors,
    Summarizer,
    SummaryError,
    SummaryRequest,
    SummaryResult,
    anchors_from_dict,
    parse_summary,
)
from ._tier import Action, Decisions, Tier, TierContext
from ._tokens import TokenCache, TokenCounter, UsageAnchor, encoding_name_for
from ._view import Item, Unit, View

__all__ = [
    "ANCHOR_TITLES",
    "DEFAULT_COMPACTABLE",
    "TIERS",
    "TIER_NAMES",
    "Action",
    "Anchors",
    "CompactionRecord",
    "ContextEngine",
    "ContextError",
    "Decisions",
    "HeuristicSummarizer",
    "Item",
    "LiteLLMSummarizer",
    "ModelInfo",
    "OffloadError",
    "Policy",
    "PolicyError",
    "RecordError",
    "Rendered",
    "Summarizer",
    "SummaryError",
    "SummaryRequest",
    "SummaryResult",
    "Tier",
    "TierContext",
    "TokenCache",
    "TokenCounter",
    "TokenizerError",
    "Unit",
    "UnknownModel",
    "UsageAnchor",
    "View",
    "anchors_from_dict",
    "delete_session",
    "encoding_name_for",
    "is_anthropic",
    "middle_truncate",
    "model_info",
    "offload_path",
    "parse_summary",
    "provider_roles",
    "rank_identifiers",
    "read_jsonl",
    "records_path",
    "render_context",
    "repair_tool_pairs",
    "select_records",
    "tool_pair_problems",
    "unique_call_ids",
]
