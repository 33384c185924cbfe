"""``openprogram.llm`` and ``openprogram.allm``: an LLM call from wherever the code runs.

Inside an agentic function the call renders from that function's frame; outside one, from
the session's top level. Both need a session bound (``with session:`` or ``session.run``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

from openprogram._runtime._current import current_frame
from openprogram._runtime._models import Model
from openprogram._runtime._session import current_session
from openprogram._runtime._tools import ToolSpec

T = TypeVar("T")
Tools = Sequence[ToolSpec | Callable[..., Any]]


@overload
def llm(
    prompt: str | None = None,
    *,
    tools: Tools = (),
    output_type: type[T],
    model: Model | str | None = None,
    max_steps: int | None = None,
) -> T: ...


@overload
def llm(
    prompt: str | None = None,
    *,
    tools: Tools = (),
    model: Model | str | None = None,
    max_steps: int | None = None,
) -> str: ...


@overload
def llm(
    prompt: str | None = None,
    *,
    tools: Tools = (),
    output_type: Any,
    model: Model | str | None = None,
    max_steps: int | None = None,
) -> Any: ...


def llm(
    prompt: str | None = None,
    *,
    tools: Sequence[ToolSpec | Callable[..., Any]] = (),
    output_type: Any = str,
    model: Model | str | None = None,
    max_steps: int | None = None,
) -> Any:
    """Ask the model in the current frame; see :meth:`openprogram.Session.llm`. Typed: the
    answer is a ``str``, or an instance of ``output_type`` when that is a class."""
    return current_session().llm(
        prompt,
        tools=tools,
        output_type=output_type,
        model=model,
        max_steps=max_steps,
        frame=current_frame(),
    )


@overload
async def allm(
    prompt: str | None = None,
    *,
    tools: Tools = (),
    output_type: type[T],
    model: Model | str | None = None,
    max_steps: int | None = None,
) -> T: ...


@overload
async def allm(
    prompt: str | None = None,
    *,
    tools: Tools = (),
    model: Model | str | None = None,
    max_steps: int | None = None,
) -> str: ...


@overload
async def allm(
    prompt: str | None = None,
    *,
    tools: Tools = (),
    output_type: Any,
    model: Model | str | None = None,
    max_steps: int | None = None,
) -> Any: ...


async def allm(
    prompt: str | None = None,
    *,
    tools: Sequence[ToolSpec | Callable[..., Any]] = (),
    output_type: Any = str,
    model: Model | str | None = None,
    max_steps: int | None = None,
) -> Any:
    """:func:`llm` for async code."""
    return await current_session().allm(
        prompt,
        tools=tools,
        output_type=output_type,
        model=model,
        max_steps=max_steps,
        frame=current_frame(),
    )
