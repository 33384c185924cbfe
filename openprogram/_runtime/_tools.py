"""Python callables as tools: a JSON schema from type hints and docstring, arguments
validated with pydantic, results (and errors) turned into the text a model reads.

A tool that raises does not stop the loop: the model gets ``Error: …`` as the result (and
the tool node records ``is_error``), as it would from any real tool.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Callable
from typing import Any, get_type_hints

import msgspec
from pydantic import BaseModel, ValidationError, create_model

from graph import ToolSchema
from openprogram._errors import ToolDefinitionError

_ARGS = re.compile(r"^\s*(?:Args|Arguments|Parameters):\s*$", re.MULTILINE)
_PARAM = re.compile(r"^\s+(\w+)(?:\s*\([^)]*\))?\s*:\s*(.+)$")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ToolSpec:
    """One tool: its name, description, JSON schema and the callable behind it."""

    def __init__(self, fn: Callable[..., Any], name: str | None = None) -> None:
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", ""))
        if not _NAME.match(self.name):
            raise ToolDefinitionError(
                f"tool name {self.name!r} must be 1-64 characters of [A-Za-z0-9_-]"
            )
        self.is_async = inspect.iscoroutinefunction(fn)
        self.description, notes = _docstring(fn)
        self.arguments = _arguments_model(fn, self.name, notes)

    def schema(self) -> ToolSchema:
        """The OpenAI ``tools`` entry for this tool."""
        parameters = self.arguments.model_json_schema()
        parameters.pop("title", None)
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }

    def bind(self, arguments: str) -> dict[str, Any]:
        """Validated keyword arguments from the model's JSON (raises ``ValueError``)."""
        try:
            raw = json.loads(arguments or "{}")
        except json.JSONDecodeError as error:
            raise ValueError(f"arguments are not JSON: {error}") from None
        if not isinstance(raw, dict):
            raise ValueError("arguments must be a JSON object")
        try:
            model = self.arguments.model_validate(raw)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()
            )
            raise ValueError(f"invalid arguments: {problems}") from None
        return {name: getattr(model, name) for name in type(model).model_fields}

    def __repr__(self) -> str:
        return f"ToolSpec({self.name!r})"


def _docstring(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    doc = inspect.getdoc(fn) or ""
    split = _ARGS.search(doc)
    summary = doc[: split.start()] if split else doc
    notes: dict[str, str] = {}
    if split:
        for line in doc[split.end() :].splitlines():
            found = _PARAM.match(line)
            if found:
                notes[found.group(1)] = found.group(2).strip()
    return " ".join(summary.split()), notes


def _arguments_model(fn: Callable[..., Any], name: str, notes: dict[str, str]) -> type[BaseModel]:
    try:
        hints = get_type_hints(fn)
    except Exception as error:
        raise ToolDefinitionError(f"tool {name!r}: cannot read its type hints: {error}") from None
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"tool {name!r}: *{parameter.name} cannot be described to a model"
            )
        if parameter.name not in hints:
            raise ToolDefinitionError(
                f"tool {name!r}: parameter {parameter.name!r} needs a type hint"
            )
        from pydantic import Field

        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (
            hints[parameter.name],
            Field(default, description=notes.get(parameter.name)),
        )
    return create_model(f"{name}_arguments", **fields)


def as_spec(tool: ToolSpec | Callable[..., Any]) -> ToolSpec:
    return tool if isinstance(tool, ToolSpec) else ToolSpec(tool)


def result_text(value: Any) -> str:
    """A tool's return value as the text a model reads."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return msgspec.json.encode(value).decode()
    except TypeError:
        return repr(value)


def run_tool(spec: ToolSpec, arguments: str) -> tuple[str, bool]:
    """Call a tool with the model's arguments: (result text, whether it is an error)."""
    try:
        kwargs = spec.bind(arguments)
        value = spec.fn(**kwargs)
        if inspect.isawaitable(value):
            value = asyncio.run(_wait(value))
    except Exception as error:  # the model sees the error, the loop goes on
        return f"Error: {error}", True
    return result_text(value), False


async def arun_tool(spec: ToolSpec, arguments: str) -> tuple[str, bool]:
    """:func:`run_tool` for async code: sync tools run in a worker thread."""
    try:
        kwargs = spec.bind(arguments)
        if spec.is_async:
            value = await spec.fn(**kwargs)
        else:
            value = await asyncio.to_thread(spec.fn, **kwargs)
            if inspect.isawaitable(value):
                value = await value
    except Exception as error:  # the model sees the error, the loop goes on
        return f"Error: {error}", True
    return result_text(value), False


async def _wait(value: Any) -> Any:
    return await value
