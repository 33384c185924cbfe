"""OpenProgram's runtime layer: trace importers, replay and the bench, the command line.

It stands on ``context`` (rendering under a budget) and ``graph`` (the stored conversation).
Subpackages: ``openprogram.importers`` (read traces into a graph) and ``openprogram.bench``
(measure policies on real traces).
"""

from openprogram._errors import (
    BaselineUnavailable,
    BenchError,
    OpenProgramError,
    SessionError,
    TraceFormatError,
    UnknownFormat,
)
from openprogram.importers import ImportStats, detect_format, import_trace

__all__ = [
    "BaselineUnavailable",
    "BenchError",
    "ImportStats",
    "OpenProgramError",
    "SessionError",
    "TraceFormatError",
    "UnknownFormat",
    "detect_format",
    "import_trace",
]
