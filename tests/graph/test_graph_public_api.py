"""The public surface of ``graph`` is exactly what we mean to export."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import graph

EXPECTED = [
    "AUDIT",
    "ChatMessage",
    "ConversationGraph",
    "CrossSessionError",
    "CycleError",
    "DEFAULT_PATTERNS",
    "Dialogue",
    "DuplicateToolResult",
    "Edge",
    "Event",
    "EventLog",
    "FUNCTION_HANDLE",
    "Finish",
    "Fork",
    "Frame",
    "Function",
    "FunctionCall",
    "FunctionFinished",
    "FunctionHandle",
    "FunctionSchema",
    "GRAPH_MIGRATIONS",
    "GraphError",
    "GraphReader",
    "GraphState",
    "GraphView",
    "HANDLE_KEY",
    "InvalidMessage",
    "InvalidText",
    "LAYER_HANDLE",
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
    "NODE_HANDLE",
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
    "TOP",
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


def test_all_is_exactly_the_public_surface() -> None:
    assert graph.__file__ is not None and graph.__file__.endswith("__init__.py")
    assert sorted(graph.__all__) == EXPECTED
    assert len(set(graph.__all__)) == len(graph.__all__)


def test_every_public_name_is_importable() -> None:
    module = importlib.import_module("graph")
    namespace: dict[str, object] = {}
    exec("from graph import *", namespace)
    for name in EXPECTED:
        assert getattr(module, name) is not None
        assert namespace[name] is getattr(module, name)


def test_public_names_have_docstrings() -> None:
    missing = [n for n in EXPECTED if not (getattr(graph, n).__doc__ or "").strip()]
    assert missing == []


def test_errors_form_one_hierarchy() -> None:
    errors = [getattr(graph, n) for n in EXPECTED if n.endswith(("Error", "Finished", "Found"))]
    errors += [graph.InvalidMessage, graph.UnknownToolCall, graph.DuplicateToolResult]
    for error in errors:
        assert issubclass(error, graph.GraphError), error
    assert issubclass(graph.UnknownToolCall, graph.ToolCallError)
    assert issubclass(graph.DuplicateToolResult, graph.ToolCallError)
    assert issubclass(graph.MigrationError, graph.StoreError)
    assert issubclass(graph.InvalidMessage, ValueError)
    assert issubclass(graph.NodeNotFound, KeyError)


def test_import_graph_does_not_load_networkx() -> None:
    """Only the networkx view needs networkx: a fresh interpreter importing ``graph`` (and
    the layers above it) never loads it, and the view's names still import from ``graph``."""
    code = (
        "import sys\n"
        "import graph, context, openprogram\n"
        "assert 'networkx' not in sys.modules, 'networkx was imported'\n"
        "from graph import export_graphml, export_json, to_networkx\n"
        "assert 'networkx' in sys.modules\n"
        "print('ok')\n"
    )
    root = Path(graph.__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
