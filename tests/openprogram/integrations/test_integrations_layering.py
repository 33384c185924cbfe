"""The adapters' packaging: ``import openprogram`` never imports a framework, and each
adapter module's public surface is what we mean."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

FRAMEWORKS = ("pydantic_ai", "langchain", "langchain_core", "langgraph", "agents", "openai")
SURFACES = {
    "openprogram.integrations": [
        "Conversations",
        "Entry",
        "MalformedMessage",
        "Mirror",
        "Paired",
        "history_functions",
    ],
    "openprogram.integrations.langchain": [
        "OpenProgramMiddleware",
        "from_messages",
        "history_tools",
        "to_entries",
    ],
    "openprogram.integrations.openai_agents": [
        "OpenProgramSession",
        "from_messages",
        "to_entries",
    ],
    "openprogram.integrations.pydantic_ai": [
        "OpenProgramCapability",
        "from_messages",
        "to_entries",
    ],
}


def test_importing_openprogram_imports_no_framework() -> None:
    code = (
        "import sys, openprogram, openprogram.integrations, openprogram.importers, "
        "openprogram.testing\n"
        f"loaded = sorted(m for m in {FRAMEWORKS!r} if m in sys.modules)\n"
        "print(','.join(loaded))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


@pytest.mark.parametrize("module", sorted(SURFACES))
def test_public_surface(module: str) -> None:
    package = importlib.import_module(module)
    assert sorted(package.__all__) == SURFACES[module]
    for name in package.__all__:
        assert getattr(package, name) is not None
