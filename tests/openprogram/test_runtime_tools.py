"""Tools from Python callables: schemas from hints and docstrings, validated arguments, the
text a model reads back."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel

from openprogram import ToolDefinitionError, ToolSpec


class Point(BaseModel):
    x: int
    y: int


def grep(pattern: str, path: str = ".", mode: Literal["fast", "full"] = "fast") -> list[str]:
    """Search files for a pattern.

    Returns the matching lines.

    Args:
        pattern: a regular expression
        path (str): where to search
        mode: how hard to look
    """
    return [f"{path}:{pattern}:{mode}"]


def test_schema_from_hints_and_docstring() -> None:
    spec = ToolSpec(grep)
    assert spec.name == "grep" and not spec.is_async
    assert spec.schema() == {
        "type": "function",
        "function": {
            "name": "grep",
            "description": "Search files for a pattern. Returns the matching lines.",
            "parameters": {
                "type": "object",
                "properties": {
                    "pattern": {
                        "description": "a regular expression",
                        "title": "Pattern",
                        "type": "string",
                    },
                    "path": {
                        "default": ".",
                        "description": "where to search",
                        "title": "Path",
                        "type": "string",
                    },
                    "mode": {
                        "default": "fast",
                        "description": "how hard to look",
                        "enum": ["fast", "full"],
                        "title": "Mode",
                        "type": "string",
                    },
                },
                "required": ["pattern"],
            },
        },
    }


def test_bad_definitions() -> None:
    def untyped(x):  # type: ignore[no-untyped-def]
        return x

    def star(*names: str) -> None:
        pass

    with pytest.raises(ToolDefinitionError, match="parameter 'x' needs a type hint"):
        ToolSpec(untyped)
    with pytest.raises(ToolDefinitionError, match=r"\*names cannot be described"):
        ToolSpec(star)
    with pytest.raises(ToolDefinitionError, match="must be 1-64 characters"):
        ToolSpec(grep, name="has space")
    with pytest.raises(ToolDefinitionError, match="must be 1-64 characters"):
        ToolSpec(lambda: None)  # "<lambda>"
    assert issubclass(ToolDefinitionError, TypeError)


def test_a_budget_under_the_tool_schemas_and_system_prompt_warns_once(tmp_path: Path) -> None:
    """Tool schemas and the system prompt are the floor no tier can cut: under it, every
    prompt goes out over the budget; the session says so once (a warning of our own
    category) and every receipt carries the floor."""
    from context import BudgetFloorWarning
    from openprogram import Session
    from openprogram.testing import TestModel

    def schema_heavy(query: str, limit: int = 10) -> str:
        """Search the very large index of everything this agent may ever need to look up,
        with many words in the description so that the tool schema alone is long enough to
        take most of a tiny budget, as a real agent's dozens of tools do.

        Args:
            query: the words to look for, in any order, matched against every document
            limit: how many hits to return at most, best first
        """
        return "nothing"

    session = Session(
        f"sqlite:///{tmp_path}/op.db",
        model=TestModel(default="ok"),
        system="You are a careful agent. " * 20,
        budget=120,
    )
    with pytest.warns(BudgetFloorWarning, match="over the budget of 120 tokens") as caught:
        assert session.llm("hi", tools=[schema_heavy]) == "ok"
        assert session.llm("again", tools=[schema_heavy]) == "ok"
    assert len([w for w in caught if w.category is BudgetFloorWarning]) == 1
    receipt = session.receipt()
    assert receipt is not None and receipt.floor_tokens > receipt.budget
    assert receipt.tokens > receipt.budget
