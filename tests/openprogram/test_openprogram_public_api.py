"""The public surface of the openprogram package and its subpackages is what we mean."""

from __future__ import annotations

import importlib

import pytest

SURFACES = {
    "openprogram": [
        "BaselineUnavailable",
        "BenchError",
        "ConfigWarning",
        "HISTORY_TOOLS",
        "HistoryTools",
        "ImportStats",
        "LeaseLost",
        "LiteLLMModel",
        "Model",
        "ModelError",
        "ModelResponse",
        "NoSession",
        "OpenProgramError",
        "OutputValidationError",
        "Replay",
        "ReplayTurn",
        "Session",
        "SessionConfig",
        "SessionError",
        "StepLimitExceeded",
        "ToolDefinitionError",
        "ToolSpec",
        "TraceFormatError",
        "UnknownFormat",
        "Usage",
        "allm",
        "current_frame",
        "current_session",
        "detect_format",
        "function",
        "import_trace",
        "llm",
        "node_text",
        "plot_functions",
        "replay",
    ],
    "openprogram.testing": ["FunctionModel", "ModelRequest", "TestModel", "override", "tool_call"],
    "openprogram.view": ["COOKIE", "Viewer", "create_app"],
    "openprogram.importers": [
        "FORMATS",
        "IMPORTED_KEY",
        "ImportStats",
        "Imported",
        "MARKERS",
        "ParsedTrace",
        "Reading",
        "detect_format",
        "find_import",
        "import_parsed",
        "import_trace",
        "parse_trace",
        "read_claude_code",
        "read_codex",
        "read_mini_swe_agent",
        "read_openai",
        "read_swe_agent",
        "read_trace",
    ],
}


@pytest.mark.parametrize("module", sorted(SURFACES))
def test_public_surface(module: str) -> None:
    package = importlib.import_module(module)
    assert sorted(package.__all__) == SURFACES[module]
    for name in package.__all__:
        assert getattr(package, name) is not None


def test_bench_exports_what_the_cli_uses() -> None:
    import openprogram.bench as bench

    for name in (
        "POLICIES",
        "Charged",
        "compute_metrics",
        "format_table",
        "identifier_losses",
        "load_trace",
        "run_policy",
        "to_jsonl",
        "tool_names",
    ):
        assert name in bench.__all__


def test_errors_share_one_base() -> None:
    import openprogram

    for name in openprogram.__all__:
        value = getattr(openprogram, name)
        if isinstance(value, type) and issubclass(value, Warning):
            assert issubclass(value, UserWarning)  # shown by default, selectable by class
        elif isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, openprogram.OpenProgramError)
