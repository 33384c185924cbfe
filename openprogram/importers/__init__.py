"""Trace importers: read agent traces (Claude Code, Codex, OpenAI messages, SWE-agent,
mini-swe-agent) as OpenAI chat messages, and load them into a ``ConversationGraph``.

Stage one, ``read_<format>(path, skip_bad=False)``, is pure parsing and yields ``Imported``
records (``parse_trace`` reads a whole file that way); stage two, ``import_parsed``, appends them
to a graph and repairs tool pairing. ``import_trace`` does both.
"""

from openprogram.importers._claude_code import read_claude_code
from openprogram.importers._codex import read_codex
from openprogram.importers._detect import FORMATS, detect_format, read_trace
from openprogram.importers._driver import (
    IMPORTED_KEY,
    ImportStats,
    ParsedTrace,
    find_import,
    import_parsed,
    import_trace,
    parse_trace,
)
from openprogram.importers._mini_swe_agent import read_mini_swe_agent
from openprogram.importers._model import MARKERS, Imported
from openprogram.importers._openai import read_openai
from openprogram.importers._reading import Reading
from openprogram.importers._swe_agent import read_swe_agent

__all__ = [
    "FORMATS",
    "IMPORTED_KEY",
    "MARKERS",
    "ImportStats",
    "Imported",
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
]
