"""OpenProgram's runtime: sessions, agentic functions, the LLM loop, tools that read what
the context cascade put away — plus trace importers, the bench and the command line.

It stands on ``context`` (rendering under a budget) and ``graph`` (the stored
conversation). Subpackages: ``openprogram.importers``, ``openprogram.bench``; fake models
for tests are in ``openprogram.testing``; the command line is ``openprogram.cli.main(argv)``.
"""

from openprogram._errors import (
    BaselineUnavailable,
    BenchError,
    ConfigWarning,
    LeaseLost,
    ModelError,
    NoSession,
    OpenProgramError,
    OutputValidationError,
    SessionError,
    StepLimitExceeded,
    ToolDefinitionError,
    TraceFormatError,
    UnknownFormat,
)
from openprogram._reports._plot import plot_functions
from openprogram._runtime._api import allm, llm
from openprogram._runtime._config import SessionConfig
from openprogram._runtime._current import current_frame
from openprogram._runtime._functions import function
from openprogram._runtime._history import HISTORY_TOOLS, HistoryTools, node_text
from openprogram._runtime._models import LiteLLMModel, Model, ModelResponse, Usage
from openprogram._runtime._session import Session, current_session
from openprogram._runtime._tools import ToolSpec
from openprogram._traces._replaying import Replay, ReplayTurn, replay
from openprogram.importers import ImportStats, detect_format, import_trace

__all__ = [
    "HISTORY_TOOLS",
    "BaselineUnavailable",
    "BenchError",
    "ConfigWarning",
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
]
