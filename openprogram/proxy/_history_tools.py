"""The session's history tools, offered upstream beside the client's and answered here.

A proxied prompt names what compaction put away (``read_output("…")``, a layer's id…), but
the client does not know those tools. The proxy offers them in the request's own shape
(a name the client's tools already use is left to the client), answers a call to one from
the session, and continues the upstream call (``_rounds``), so the client only ever sees
its own tools. ``--no-history-tools`` leaves requests as the render made them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from graph import ToolSchema
from openprogram._json import obj, objects
from openprogram._runtime._history import HISTORY_TOOLS
from openprogram._runtime._host import SessionHost
from openprogram.integrations._history import history_functions
from openprogram.proxy._bodies import Request

__all__ = ["PROTOCOLS", "HistoryCall", "answer", "offer", "schemas"]

PROTOCOLS = ("anthropic", "openai", "responses")
"""The wires whose answers the proxy can continue."""
MAX_ROUNDS = 4
"""Upstream calls one client request may take (the last one's history calls end the turn)."""


@dataclass(frozen=True)
class HistoryCall:
    """One call the model made to a history tool: its call id, name and JSON arguments."""

    id: str
    name: str
    arguments: str


def schemas(session: SessionHost, taken: set[str]) -> list[ToolSchema]:
    """The history tools as chat schemas (what the budget counts), but for ``taken`` names."""
    return [spec.schema() for spec in session.history.specs() if spec.name not in taken]


def client_names(protocol: str, body: Request) -> set[str]:
    """The names of the client's own tools."""
    names = set()
    for tool in objects(body.get("tools")):
        name = tool.get("name") if protocol != "openai" else obj(tool.get("function")).get("name")
        names.add(str(name))
    return names


def offer(protocol: str, request: Request, chat: list[ToolSchema]) -> tuple[str, ...]:
    """Add the history tools (``chat`` schemas) to ``request`` in its wire's shape; their names."""
    added: list[Mapping[str, object]] = []
    for schema in chat:
        function = schema["function"]
        tool: Mapping[str, object]
        if protocol == "openai":
            tool = schema
        elif protocol == "anthropic":
            tool = {
                "name": function["name"],
                "description": function["description"],
                "input_schema": function["parameters"],
            }
        else:
            tool = {
                "type": "function",
                "name": function["name"],
                "description": function["description"],
                "parameters": function["parameters"],
            }
        added.append(tool)
    if added:
        request["tools"] = [*(request.get("tools") or ()), *added]
    return tuple(str(schema["function"]["name"]) for schema in chat)


def answer(session: SessionHost, call: HistoryCall) -> str:
    """What the history tool says to ``call`` (a bad id or argument is text the model reads)."""
    tools = {fn.__name__: fn for fn in history_functions(session)}
    if call.name not in tools or call.name not in HISTORY_TOOLS:
        return f"Error: no history tool {call.name!r}"
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError as error:
        return f"Error: the arguments are not JSON: {error}"
    if not isinstance(arguments, dict):
        return "Error: the arguments must be a JSON object"
    try:
        return tools[call.name](**arguments)
    except TypeError as error:
        return f"Error: {error}"
