"""The README shows each adapter in a block of under ten lines, and each block compiles and
names what its module exports."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

README = Path(__file__).parents[3] / "README.md"
MODULES = {
    "openprogram.integrations.pydantic_ai": "OpenProgramCapability",
    "openprogram.integrations.langchain": "OpenProgramMiddleware",
    "openprogram.integrations.openai_agents": "OpenProgramSession",
}


def test_each_adapter_has_a_short_readme_block() -> None:
    text = README.read_text()
    section = text[text.index("## Agents built on other frameworks") :]
    section = section[: section.index("\n## ", 1)]
    blocks = re.findall(r"```py\n(.*?)```", section, flags=re.S)
    assert len(blocks) == len(MODULES)
    for block, (module, name) in zip(blocks, MODULES.items(), strict=True):
        assert len(block.strip().splitlines()) < 10
        compile(block, str(README), "exec")
        assert f"from {module} import {name}" in block
        assert name in importlib.import_module(module).__all__
