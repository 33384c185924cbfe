"""Conversations as a graph of dialogue, function and tool nodes, stored append-only.

The bottom layer of OpenProgram: it imports nothing of ours. ``context`` renders from it,
``openprogram`` runs agents on it.
"""

from typing import TYPE_CHECKING, Any

from ._chat import ChatMessage, FunctionCall, FunctionSchema, ToolCall, ToolSchema
from ._engines import dispose_engines, engine_for
from ._errors import (
    CrossSessionError,
    CycleError,
    DuplicateToolResult,
    FunctionFinished,
    GraphError,
    InvalidMessage,
    InvalidText,
    LayerConflict,
    LayerError,
    LayerHandleTaken,
    LayerNotFound,
    LayerRolledBack,
    MigrationError,
    NoDatabase,
    NodeNotFound,
    StoreError,
    ToolCallError,
    UnknownToolCall,
)
from ._functions import TOP, Frame, FunctionHandle
from ._graph import ConversationGraph
from ._handles import (
    FUNCTION_HANDLE,
    HANDLE_KEY,
    LAYER_HANDLE,
    NODE_HANDLE,
    is_handle,
    layer_handle,
    next_layer_handle,
    node_handle,
    resolve_ref,
)
from ._html import html_table
from ._ids import check_text, is_safe_id, new_id, seeded_ids
from ._messages import call_id_text
from ._migrations import (
    GRAPH_MIGRATIONS,
    Migration,
    applied_migrations,
    migrate,
    migration,
    register_migration,
    registered_migrations,
)
from ._nodes import (
    Dialogue,
    Edge,
    Event,
    Finish,
    Fork,
    Function,
    Layer,
    LayerInfo,
    Node,
    Rollback,
    Tool,
    ToolResult,
)
from ._open import open_store, register_store, store_schemes
from ._openai import (
    as_text,
    dialogue_message,
    function_call_id,
    function_messages,
    steps_to_messages,
    text_of,
    tool_call,
    tool_result_message,
)
from ._protocols import AUDIT, EventLog, Leases, LogEntry, SessionInfo, SideData
from ._reader import GraphReader, GraphView
from ._redact import DEFAULT_PATTERNS, Redactor, redaction_setting, redactor_from
from ._scrub import Scrubber, ScrubReport, scrub, scrubber
from ._side_migrations import SideImport, SideMigration
from ._sql import SQLStore
from ._state import GraphState
from ._store import MemoryStore, Store
from ._url import StoreURL
from ._walk import Step, inside, visible, visible_since

if TYPE_CHECKING:
    from ._export import export_format, export_session, is_export, load_export, session_side
    from ._nx import export_graphml, export_json, to_networkx

_LAZY = {
    "export_graphml": "_nx",
    "export_json": "_nx",
    "to_networkx": "_nx",
    "export_format": "_export",
    "export_session": "_export",
    "is_export": "_export",
    "load_export": "_export",
    "session_side": "_export",
}


def __getattr__(name: str) -> Any:
    """The networkx view's functions, imported on first use: ``import graph`` must not pay
    for networkx (about 0.2 s and 20 MB) when nothing asks for a networkx graph."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AUDIT",
    "DEFAULT_PATTERNS",
    "FUNCTION_HANDLE",
    "GRAPH_MIGRATIONS",
    "HANDLE_KEY",
    "LAYER_HANDLE",
    "NODE_HANDLE",
    "TOP",
    "ChatMessage",
    "ConversationGraph",
    "CrossSessionError",
    "CycleError",
    "Dialogue",
    "DuplicateToolResult",
    "Edge",
    "Event",
    "EventLog",
    "Finish",
    "Fork",
    "Frame",
    "Function",
    "FunctionCall",
    "FunctionFinished",
    "FunctionHandle",
    "FunctionSchema",
    "GraphError",
    "GraphReader",
    "GraphState",
    "GraphView",
    "InvalidMessage",
    "InvalidText",
    "Layer",
    "LayerConflict",
    "LayerError",
    "LayerHandleTaken",
    "LayerInfo",
    "LayerNotFound",
    "LayerRolledBack",
    "Leases",
    "LogEntry",
    "MemoryStore",
    "Migration",
    "MigrationError",
    "NoDatabase",
    "Node",
    "NodeNotFound",
    "Redactor",
    "Rollback",
    "SQLStore",
    "ScrubReport",
    "Scrubber",
    "SessionInfo",
    "SideData",
    "SideImport",
    "SideMigration",
    "Step",
    "Store",
    "StoreError",
    "StoreURL",
    "Tool",
    "ToolCall",
    "ToolCallError",
    "ToolResult",
    "ToolSchema",
    "UnknownToolCall",
    "applied_migrations",
    "as_text",
    "call_id_text",
    "check_text",
    "dialogue_message",
    "dispose_engines",
    "engine_for",
    "export_format",
    "export_graphml",
    "export_json",
    "export_session",
    "function_call_id",
    "function_messages",
    "html_table",
    "inside",
    "is_export",
    "is_handle",
    "is_safe_id",
    "layer_handle",
    "load_export",
    "migrate",
    "migration",
    "new_id",
    "next_layer_handle",
    "node_handle",
    "open_store",
    "redaction_setting",
    "redactor_from",
    "register_migration",
    "register_store",
    "registered_migrations",
    "resolve_ref",
    "scrub",
    "scrubber",
    "seeded_ids",
    "session_side",
    "steps_to_messages",
    "store_schemes",
    "text_of",
    "to_networkx",
    "tool_call",
    "tool_result_message",
    "visible",
    "visible_since",
]
